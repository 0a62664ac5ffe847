//! The crate documentation's guide compiles the code xdrgen generates from `guide/kv.x`, kept
//! in `guide/kv.rs` because a doctest cannot run a build script: this test fails when that
//! copy is not what the compiler generates now.

use std::path::Path;

#[test]
fn the_guides_generated_code_is_what_xdrgen_generates_from_its_kv_x() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("guide");
    let generated = rpcrdma_xdrgen::Config::new()
        .check_files(&[dir.join("kv.x")])
        .unwrap_or_else(|e| panic!("guide/kv.x: {e}"))
        .generate()
        .unwrap_or_else(|e| panic!("guide/kv.x: {e}"));
    let kept = std::fs::read_to_string(dir.join("kv.rs")).expect("guide/kv.rs");
    assert!(
        kept == generated,
        "runtime/guide/kv.rs differs from what xdrgen generates from runtime/guide/kv.x; \
         regenerate it with\n    cargo run -p rpcrdma-xdrgen -- runtime/guide/kv.x -o runtime/guide/kv.rs"
    );
}
