//! Every misuse of `#[derive(Xdr)]` and `#[derive(DdpEligible)]` is a compile error pointing
//! at the offending tokens; so is an implementation of an xdrgen-generated server trait that
//! misses a procedure or whose future is not `Send` (`ui/services/`, on the code `build.rs`
//! generates from `xdrgen/tests/services/calc.x`). Bless changes with `TRYBUILD=overwrite` and
//! review the `.stderr`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*/*.rs");
}
