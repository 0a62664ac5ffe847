//! Every misuse of `#[derive(Xdr)]` and `#[derive(DdpEligible)]` is a compile error pointing
//! at the offending tokens. Bless changes with `TRYBUILD=overwrite` and review the `.stderr`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*/*.rs");
}
