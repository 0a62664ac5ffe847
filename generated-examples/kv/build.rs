//! Generates the key-value service (`kv.x`: types, a typed client, a server trait).

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    rpcrdma_xdrgen::Config::new()
        .output_file("kv.rs")
        .compile(&["kv.x"])?;
    Ok(())
}
