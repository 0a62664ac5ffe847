//! The Rust snippets of the READMEs (the repository's and each published crate's), compiled (and, unless marked `no_run`, run) as doctests
//! exactly as they are shown: `cargo test -p readme-tests --doc`. `build.rs` generates the
//! code they include from `$OUT_DIR`, as a user's build script would.

/// README.md.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct Readme;

/// runtime/README.md (the crate `rpcrdma`).
#[cfg(doctest)]
#[doc = include_str!("../../../runtime/README.md")]
pub struct RuntimeReadme;

/// xdrgen/README.md (the crate `rpcrdma-xdrgen`).
#[cfg(doctest)]
#[doc = include_str!("../../../xdrgen/README.md")]
pub struct XdrgenReadme;

/// xdr-derive/README.md (the crate `rpcrdma-derive`).
#[cfg(doctest)]
#[doc = include_str!("../../../xdr-derive/README.md")]
pub struct DeriveReadme;

#[cfg(test)]
mod tests {
    /// README.md shows the guide's `kv.x`, from its first definition on, as its snippet
    /// generates it.
    #[test]
    fn the_readme_shows_the_kv_x_its_snippet_is_generated_from() {
        let readme = include_str!("../../../README.md");
        let kv = include_str!("../../../runtime/guide/kv.x");
        let body = &kv[kv.find("const KV_MAXKEY").expect("kv.x defines KV_MAXKEY")..];
        assert!(
            readme.contains(&format!("```text\n{body}```\n")),
            "README.md's kv.x block differs from runtime/guide/kv.x (from `const KV_MAXKEY` on)"
        );
    }
}
