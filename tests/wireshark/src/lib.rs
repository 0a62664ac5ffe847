//! Wireshark as the judge of RPC-over-RDMA: traffic of the software iWARP provider captured
//! with [`rpcrdma::rdma::soft::PcapTap`] and dissected by tshark, with the Lua dissector
//! xdrgen generates (`dissectors/rpcrdma.lua`) and with Wireshark's own (`rpcordma`, version
//! 1 only).
//!
//! * [`tshark`]: running tshark on a capture, fields per frame, expert infos.
//! * [`v1`]: RPC-over-RDMA version 1 traffic of `rpcrdma::transport` (inline, Read, Write
//!   and Reply chunks, a long call).
//! * [`v2`]: version 2 headers built with the types xdrgen generates from `specs/common.x`
//!   and `specs/baseops.x`, sent as RDMA Sends ([`v2::capture`] is the one function to swap
//!   for the version 2 transport once it exists).
#![warn(missing_docs)]

pub mod tshark;
pub mod v1;
pub mod v2;

use std::path::PathBuf;

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// The shipped dissector for versions 1 and 2 (`dissectors/rpcrdma.lua`).
pub fn shipped_dissector() -> PathBuf {
    workspace().join("dissectors/rpcrdma.lua")
}

/// A scratch directory for this test process's captures.
pub fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rpcrdma-wireshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the scratch directory");
    dir
}

/// Writes `bytes` as `name` in [`scratch`] and returns the path.
pub fn save(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch().join(name);
    std::fs::write(&path, bytes).expect("writing a capture");
    path
}
