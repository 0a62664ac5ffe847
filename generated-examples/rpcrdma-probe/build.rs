//! Generates the probe extension's types the way seed 003 section 9 says an extension is
//! used: its `.x` file compiled together with the base protocol's (`xdrgen specs/common.x
//! specs/baseops.x specs/extensions/probe.x`), strict mode.

use std::error::Error;

const INPUTS: &[&str] = &[
    "../../specs/common.x",
    "../../specs/baseops.x",
    "../../specs/extensions/probe.x",
];

fn main() -> Result<(), Box<dyn Error>> {
    for input in INPUTS {
        println!("cargo:rerun-if-changed={input}");
    }
    rpcrdma_xdrgen::Config::new()
        .lenient(false)
        .services(false)
        .output_file("rpcrdma_v2_probe.rs")
        .compile(INPUTS)?;
    Ok(())
}
