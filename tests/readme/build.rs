//! Generates what the READMEs' snippets include from `$OUT_DIR`, as their `build.rs` would:
//! `kv.rs` from the crate documentation's `kv.x` (`runtime/guide/kv.x`, README.md), and
//! `calc.rs` from the `.x` that xdrgen/README.md shows in its "Services" section.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    rpcrdma_xdrgen::compile(&["../../runtime/guide/kv.x"])?;

    let readme = "../../xdrgen/README.md";
    println!("cargo:rerun-if-changed={readme}");
    let text = std::fs::read_to_string(readme)?;
    let calc =
        services_program(&text).ok_or("xdrgen/README.md: no ```c block under ## Services")?;
    let path = PathBuf::from(std::env::var("OUT_DIR")?).join("calc.x");
    std::fs::write(&path, calc)?;
    rpcrdma_xdrgen::Config::new().compile(&[path])?;
    Ok(())
}

/// The first ```c block after the "## Services" heading.
fn services_program(readme: &str) -> Option<&str> {
    let section = &readme[readme.find("\n## Services\n")?..];
    let start = section.find("\n```c\n")? + "\n```c\n".len();
    let len = section[start..].find("\n```\n")? + 1;
    Some(&section[start..start + len])
}
