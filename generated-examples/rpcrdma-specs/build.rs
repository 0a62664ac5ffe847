//! Generates one Rust module per spec of `specs/` with xdrgen, strict mode: the corrected
//! specs must compile without any leniency (`specs/ERRATA.md`). Codecs only: this crate does
//! not enable the runtime's `rpc` feature, so the one program here (the 2004 draft's
//! CONFIG_RDMA_PROG) gets its procedure structs but no client or server (`services(false)`).

use std::error::Error;

/// (output file, inputs compiled together as one namespace)
const SPECS: &[(&str, &[&str])] = &[
    ("rpcrdma_v1.rs", &["../../specs/rpcrdma-v1.x"]),
    ("rpcrdma_2004.rs", &["../../specs/rpcrdma-2004.x"]),
    (
        "rpcrdma_v2.rs",
        &["../../specs/common.x", "../../specs/baseops.x"],
    ),
    // The working group's revision -07 of the version 2 draft (README "When a new draft
    // comes out"), beside seed 003's.
    (
        "rpcrdma_v2_ietf07.rs",
        &[
            "../../specs/ietf-07/common.x",
            "../../specs/ietf-07/baseops.x",
        ],
    ),
    ("rpc_msg.rs", &["../../specs/rpc_msg.x"]),
];

fn main() -> Result<(), Box<dyn Error>> {
    for &(output, inputs) in SPECS {
        for input in inputs {
            println!("cargo:rerun-if-changed={input}");
        }
        rpcrdma_xdrgen::Config::new()
            .lenient(false)
            .services(false)
            .output_file(output)
            .compile(inputs)?;
    }
    Ok(())
}
