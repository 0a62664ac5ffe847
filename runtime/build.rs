//! Generates the message types the runtime speaks from the specs, so that no hand-written copy
//! of them exists: ONC RPC (`specs/rpc_msg.x`, feature `rpc`) and the RPC-over-RDMA version 1
//! header (`specs/rpcrdma-v1.x`, feature `transport`). Strict mode: the corrected specs compile
//! without any leniency (`specs/ERRATA.md`).

fn main() {
    #[cfg(feature = "rpc")]
    generate("rpc_msg.rs", "../specs/rpc_msg.x");
    #[cfg(feature = "transport")]
    generate("rpcrdma_v1.rs", "../specs/rpcrdma-v1.x");
    // The program of the transport conformance suite (rpcrdma::transport::conformance).
    #[cfg(feature = "transport")]
    generate("testprog.rs", "src/transport/conformance/testprog.x");
}

#[cfg(feature = "rpc")]
fn generate(output: &str, input: &str) {
    println!("cargo:rerun-if-changed={input}");
    if let Err(e) = xdrgen::Config::new()
        .lenient(false)
        .output_file(output)
        .compile(&[input])
    {
        panic!("xdrgen {input}: {e}");
    }
}
