//! Generates the services of `xdrgen/tests/services/calc.x` for the trybuild cases under
//! `ui/services/`, as a user's build script would.

fn main() {
    rpcrdma_xdrgen::Config::new()
        .output_file("calc.rs")
        .compile(&["../xdrgen/tests/services/calc.x"])
        .unwrap_or_else(|e| panic!("xdrgen: {e}"));
}
