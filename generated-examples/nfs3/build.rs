//! Generates NFSv3 (with the RFC 8267 DDP marks of `specs/nfs3.ddp`) and the RFC 5531 message
//! protocol, MOUNT version 3 and the port mapper version 2, each as its own module.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    // The marks are also written as `/* @ddp */` in nfs3.x; the binding file says the same, and
    // a test checks that the two agree. Giving both here exercises both paths.
    rpcrdma_xdrgen::Config::new()
        .binding_file("../../specs/nfs3.ddp")
        .output_file("nfs3.rs")
        .compile(&["../../specs/nfs3.x"])?;
    rpcrdma_xdrgen::Config::new()
        .output_file("rpc_msg.rs")
        .compile(&["../../specs/rpc_msg.x"])?;
    // What a client needs before its first NFS call: the port mapper (where MOUNT listens) and
    // MOUNT (the export's root file handle).
    rpcrdma_xdrgen::Config::new()
        .output_file("mount3.rs")
        .compile(&["../../specs/mount3.x"])?;
    rpcrdma_xdrgen::Config::new()
        .output_file("pmap.rs")
        .compile(&["../../specs/pmap.x"])?;
    Ok(())
}
