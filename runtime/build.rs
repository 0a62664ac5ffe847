//! Generates the message types the runtime speaks from the specs, so that no hand-written copy
//! of them exists: ONC RPC (`specs/rpc_msg.x`, feature `rpc`) and the RPC-over-RDMA headers
//! (feature `transport`): version 1 from `specs/rpcrdma-v1.x`, version 2 from `specs/common.x`
//! with `specs/baseops.x`, and the 2004 protocol's `CONFIG_RDMA_PROG` from
//! `specs/rpcrdma-2004.x`. Strict mode: the corrected specs compile without any leniency
//! (`specs/ERRATA.md`).
//!
//! `runtime/specs/` holds symbolic links to the workspace's `specs/`: cargo packages the files
//! they point to, so the published crate builds on its own.

fn main() {
    #[cfg(feature = "rpc")]
    generate("rpc_msg.rs", &["specs/rpc_msg.x"]);
    #[cfg(feature = "transport")]
    generate("rpcrdma_v1.rs", &["specs/rpcrdma-v1.x"]);
    // Version 2 is two files compiled together (seed 003 section 6.5).
    #[cfg(feature = "transport")]
    generate("rpcrdma_v2.rs", &["specs/common.x", "specs/baseops.x"]);
    // The 2004 protocol's Connection Configuration Protocol (rpcrdma::transport::mode2004).
    #[cfg(feature = "transport")]
    generate("rpcrdma_2004.rs", &["specs/rpcrdma-2004.x"]);
    // The program of the transport conformance suite (rpcrdma::transport::conformance).
    #[cfg(feature = "transport")]
    generate("testprog.rs", &["src/transport/conformance/testprog.x"]);
}

#[cfg(feature = "rpc")]
fn generate(output: &str, inputs: &[&str]) {
    for input in inputs {
        println!("cargo:rerun-if-changed={input}");
    }
    if let Err(e) = rpcrdma_xdrgen::Config::new()
        .lenient(false)
        .output_file(output)
        .compile(inputs)
    {
        panic!("xdrgen {inputs:?}: {e}");
    }
}
