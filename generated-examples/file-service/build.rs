//! Generates the file service (`files.x`: types, a typed client, a server trait) with its two
//! `/* @ddp */` marks.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    rpcrdma_xdrgen::Config::new()
        .output_file("files.rs")
        .compile(&["files.x"])?;
    Ok(())
}
