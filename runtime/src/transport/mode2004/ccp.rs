//! The Connection Configuration Protocol (seed 000 section 6): `CONFIG_RDMA_PROG` as xdrgen
//! generates it from `specs/rpcrdma-2004.x` when the crate is built, a client and a server
//! trait like any program's.

#![allow(missing_docs, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/rpcrdma_2004.rs"));
