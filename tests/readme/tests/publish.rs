//! Exactly the three library crates are publishable: every other member of the workspace says
//! `publish = false`, so that `scripts/test`'s `cargo package -p rpcrdma-xdrgen -p
//! rpcrdma-derive -p rpcrdma` covers everything that could reach the registry.

use std::collections::BTreeSet;
use std::path::Path;

/// The lines of a TOML table (`[package]`), up to the next table header.
fn table<'a>(manifest: &'a str, header: &str) -> Vec<&'a str> {
    manifest
        .lines()
        .skip_while(|line| line.trim() != header)
        .skip(1)
        .take_while(|line| !line.trim_start().starts_with('['))
        .collect()
}

/// The quoted value of `key = "value"` among `lines`.
fn string_value<'a>(lines: &[&'a str], key: &str) -> Option<&'a str> {
    lines.iter().find_map(|line| {
        let rest = line
            .trim()
            .strip_prefix(key)?
            .trim_start()
            .strip_prefix('=')?;
        rest.trim().strip_prefix('"')?.strip_suffix('"')
    })
}

#[test]
fn only_the_library_crates_can_be_published() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members: Vec<&str> = workspace
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("[workspace] members")
        .0
        .lines()
        .filter_map(|line| {
            line.trim()
                .strip_suffix(',')?
                .strip_prefix('"')?
                .strip_suffix('"')
        })
        .collect();
    assert!(members.len() > 3, "members read: {members:?}");

    let mut publishable = BTreeSet::new();
    for member in &members {
        let path = root.join(member).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).expect("a member's Cargo.toml");
        let package = table(&manifest, "[package]");
        let name = string_value(&package, "name").expect("[package] name");
        let unpublished = package.iter().any(|line| {
            let line: String = line.split_whitespace().collect();
            line == "publish=false"
        });
        if !unpublished {
            publishable.insert(name.to_string());
        }
    }
    let expected: BTreeSet<String> = ["rpcrdma", "rpcrdma-derive", "rpcrdma-xdrgen"]
        .map(String::from)
        .into();
    assert_eq!(
        publishable, expected,
        "a workspace crate without `publish = false` must be packaged by scripts/test \
         (cargo package -p ...), or say `publish = false`"
    );
}
