//! Runs rpcgen on `specs/rpc_msg.x` and `specs/rpcrdma-v1.x` and compiles the generated C
//! with the shims of `csrc/` against libtirpc.
//!
//! rpc_msg.x defines the same names as libtirpc's `<rpc/rpc_msg.h>` and `<rpc/auth.h>`
//! (`rpc_msg`, `opaque_auth`, `xdr_opaque_auth`, ...). Its translation units therefore see
//! a shadow `<rpc/rpc.h>` that includes only the XDR primitives (`<rpc/types.h>`,
//! `<rpc/xdr.h>`), and every `xdr_*` function rpcgen generates for it is renamed
//! `oracle_xdr_*` with `-D`, so no type or symbol meets libtirpc's.
//!
//! Without rpcgen or libtirpc the crate still builds (cfg `rpcgen_oracle_missing`) and its
//! tests say they were skipped; `scripts/setup` installs both.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let specs = manifest.join("../../specs");
    for f in ["rpc_msg.x", "rpcrdma-v1.x"] {
        println!("cargo:rerun-if-changed={}", specs.join(f).display());
    }
    for f in ["oracle.h", "shim_v1.c", "shim_rpc_msg.c"] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest.join("csrc").join(f).display()
        );
    }

    if let Err(why) = missing_tools() {
        println!("cargo:warning=rpcgen-oracle disabled: {why}; run scripts/setup");
        println!("cargo:rustc-cfg=rpcgen_oracle_missing");
        return;
    }

    let tirpc_include = tirpc_include_dirs();
    let csrc = manifest.join("csrc");

    // RPC-over-RDMA version 1: nothing clashes, plain <rpc/rpc.h>.
    rpcgen(&specs.join("rpcrdma-v1.x"), &out, "rpcrdma_v1");
    let mut v1 = cc::Build::new();
    v1.file(out.join("rpcrdma_v1_xdr.c"))
        .file(csrc.join("shim_v1.c"))
        .include(&out)
        .include(&csrc);
    common_flags(&mut v1, &tirpc_include);
    v1.compile("oracle_v1");

    // ONC RPC messages: shadow <rpc/rpc.h> and renamed xdr_* functions.
    rpcgen(&specs.join("rpc_msg.x"), &out, "rpc_msg");
    let shadow = out.join("shadow");
    fs::create_dir_all(shadow.join("rpc")).expect("create shadow include dir");
    fs::write(
        shadow.join("rpc/rpc.h"),
        "/* rpcgen-oracle: XDR primitives only, see build.rs */\n\
         #include <rpc/types.h>\n#include <rpc/xdr.h>\n",
    )
    .expect("write shadow rpc.h");
    let generated = fs::read_to_string(out.join("rpc_msg_xdr.c")).expect("read rpc_msg_xdr.c");
    let mut rpc = cc::Build::new();
    rpc.include(&shadow) // before the system include dirs
        .file(out.join("rpc_msg_xdr.c"))
        .file(csrc.join("shim_rpc_msg.c"))
        .include(&out)
        .include(&csrc);
    for name in xdr_function_names(&generated) {
        rpc.define(&name, Some(format!("oracle_{name}").as_str()));
    }
    common_flags(&mut rpc, &tirpc_include);
    rpc.compile("oracle_rpc_msg");

    for lib in tirpc_libs() {
        println!("cargo:rustc-link-lib={lib}");
    }
}

fn missing_tools() -> Result<(), String> {
    let rpcgen = Command::new("rpcgen").arg("--version").output();
    if rpcgen.is_err() {
        return Err("rpcgen not found (Debian package rpcsvc-proto)".into());
    }
    let has_header = tirpc_include_dirs()
        .iter()
        .any(|d| d.join("rpc/xdr.h").is_file());
    if !has_header {
        return Err("libtirpc headers not found (Debian package libtirpc-dev)".into());
    }
    Ok(())
}

/// `pkg-config --cflags libtirpc`, falling back to Debian's /usr/include/tirpc.
fn tirpc_include_dirs() -> Vec<PathBuf> {
    let from_pkg_config = Command::new("pkg-config")
        .args(["--cflags", "libtirpc"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    match from_pkg_config {
        Some(flags) => flags
            .split_whitespace()
            .filter_map(|f| f.strip_prefix("-I"))
            .map(PathBuf::from)
            .collect(),
        None => vec![PathBuf::from("/usr/include/tirpc")],
    }
}

/// `pkg-config --libs libtirpc` as library names, falling back to `tirpc`.
fn tirpc_libs() -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(["--libs", "libtirpc"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(out) = out else {
        return vec!["tirpc".into()];
    };
    let flags = String::from_utf8_lossy(&out.stdout).into_owned();
    for dir in flags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-L"))
    {
        println!("cargo:rustc-link-search=native={dir}");
    }
    let libs: Vec<String> = flags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-l"))
        .map(str::to_owned)
        .collect();
    if libs.is_empty() {
        vec!["tirpc".into()]
    } else {
        libs
    }
}

fn common_flags(build: &mut cc::Build, tirpc_include: &[PathBuf]) {
    for dir in tirpc_include {
        build.include(dir);
    }
    build
        .std("gnu99")
        .warnings(true)
        // rpcgen declares `register int32_t *buf;` in every function and uses few.
        .flag_if_supported("-Wno-unused-variable")
        .flag_if_supported("-Wno-unused-parameter");
}

/// Runs `rpcgen -h` and `rpcgen -c` on a copy of `spec` named `stem.x` in `out` (rpcgen
/// names the header guard and the `#include` after the input file).
fn rpcgen(spec: &Path, out: &Path, stem: &str) {
    let input = format!("{stem}.x");
    fs::copy(spec, out.join(&input))
        .unwrap_or_else(|e| panic!("copy {} to OUT_DIR: {e}", spec.display()));
    for (flag, output) in [("-h", format!("{stem}.h")), ("-c", format!("{stem}_xdr.c"))] {
        let _ = fs::remove_file(out.join(&output));
        let result = Command::new("rpcgen")
            .args([flag, "-o", &output, &input])
            .current_dir(out)
            .output()
            .expect("run rpcgen");
        if !result.status.success() {
            panic!(
                "rpcgen {flag} {} failed:\n{}{}",
                spec.display(),
                String::from_utf8_lossy(&result.stdout),
                String::from_utf8_lossy(&result.stderr)
            );
        }
    }
}

/// Names of the functions rpcgen defined: it writes `bool_t` on one line and
/// `xdr_NAME (XDR *xdrs, ...)` on the next.
fn xdr_function_names(generated_c: &str) -> Vec<String> {
    generated_c
        .lines()
        .filter_map(|l| l.strip_prefix("xdr_"))
        .filter_map(|rest| {
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            rest[end..]
                .trim_start()
                .starts_with('(')
                .then(|| format!("xdr_{}", &rest[..end]))
        })
        .collect()
}
