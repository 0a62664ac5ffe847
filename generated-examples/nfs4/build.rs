//! Generates NFSv4.1 and its callback program from `specs/nfs4.x`, with the RFC 8267 DDP marks
//! of `specs/nfs4.ddp`.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    rpcrdma_xdrgen::Config::new()
        .binding_file("../../specs/nfs4.ddp")
        .output_file("nfs4.rs")
        .compile(&["../../specs/nfs4.x"])?;
    Ok(())
}
