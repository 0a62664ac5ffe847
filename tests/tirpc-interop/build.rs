//! Generates both sides of `interop.x`: the Rust types and procedures with xdrgen, and with
//! rpcgen the C stubs that `csrc/server.c` and `csrc/client.c` are built on, as two programs
//! linked against libtirpc. Their paths reach the crate as `TIRPC_INTEROP_SERVER` and
//! `TIRPC_INTEROP_CLIENT`.
//!
//! Without rpcgen or libtirpc the crate still builds (cfg `tirpc_interop_missing`, the reason
//! in `TIRPC_INTEROP_MISSING`), and the interop tests fail saying so.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const C_SOURCES: [&str; 3] = ["common.h", "server.c", "client.c"];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let spec = manifest.join("interop.x");

    if let Err(e) = rpcrdma_xdrgen::Config::new()
        .output_file("interop.rs")
        .compile(&[&spec])
    {
        panic!("xdrgen {}: {e}", spec.display());
    }

    let csrc = manifest.join("csrc");
    for f in C_SOURCES {
        println!("cargo:rerun-if-changed={}", csrc.join(f).display());
    }
    let tirpc = match Tirpc::find() {
        Ok(t) => t,
        Err(why) => {
            println!(
                "cargo:warning=tirpc-interop: the C side is not built: {why}; run scripts/setup"
            );
            println!("cargo:rustc-cfg=tirpc_interop_missing");
            println!("cargo:rustc-env=TIRPC_INTEROP_MISSING={why}");
            return;
        }
    };

    std::fs::copy(&spec, out.join("interop.x")).expect("copy interop.x to OUT_DIR");
    for (flag, output) in [
        ("-h", "interop.h"),
        ("-c", "interop_xdr.c"),
        ("-l", "interop_clnt.c"),
        ("-m", "interop_svc.c"),
    ] {
        rpcgen(&out, flag, output);
    }

    let server = out.join("interop_server");
    link(
        &tirpc,
        &out,
        &[
            out.join("interop_svc.c"),
            out.join("interop_xdr.c"),
            csrc.join("server.c"),
        ],
        &csrc,
        &server,
    );
    let client = out.join("interop_client");
    link(
        &tirpc,
        &out,
        &[
            out.join("interop_clnt.c"),
            out.join("interop_xdr.c"),
            csrc.join("client.c"),
        ],
        &csrc,
        &client,
    );
    println!("cargo:rustc-env=TIRPC_INTEROP_SERVER={}", server.display());
    println!("cargo:rustc-env=TIRPC_INTEROP_CLIENT={}", client.display());
}

/// Where libtirpc is: `pkg-config --cflags --libs libtirpc`, else Debian's paths.
/// (tests/rpcgen-oracle/build.rs finds it the same way for a static library.)
struct Tirpc {
    cflags: Vec<String>,
    libs: Vec<String>,
}

impl Tirpc {
    fn find() -> Result<Tirpc, String> {
        if Command::new("rpcgen").arg("--version").output().is_err() {
            return Err("rpcgen not found (Debian package rpcsvc-proto)".into());
        }
        let pkg_config = |arg: &str| {
            Command::new("pkg-config")
                .args([arg, "libtirpc"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
        };
        let cflags = pkg_config("--cflags").unwrap_or_else(|| vec!["-I/usr/include/tirpc".into()]);
        let libs = pkg_config("--libs").unwrap_or_else(|| vec!["-ltirpc".into()]);
        let has_header = cflags
            .iter()
            .filter_map(|f| f.strip_prefix("-I"))
            .any(|d| Path::new(d).join("rpc/rpc.h").is_file());
        if !has_header {
            return Err("libtirpc headers not found (Debian package libtirpc-dev)".into());
        }
        Ok(Tirpc { cflags, libs })
    }
}

/// Runs `rpcgen FLAG -o OUTPUT interop.x` in `out` (rpcgen names the header guard and the
/// `#include` after its input file, hence the copy there).
fn rpcgen(out: &Path, flag: &str, output: &str) {
    let _ = std::fs::remove_file(out.join(output));
    let result = Command::new("rpcgen")
        .args([flag, "-o", output, "interop.x"])
        .current_dir(out)
        .output()
        .expect("run rpcgen");
    if !result.status.success() {
        panic!(
            "rpcgen {flag} failed:\n{}{}",
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        );
    }
}

/// Compiles and links `sources` into the program `output`, optimized (the bench compares
/// it with Rust in release mode).
fn link(tirpc: &Tirpc, out: &Path, sources: &[PathBuf], csrc: &Path, output: &Path) {
    let compiler = cc::Build::new()
        .opt_level(2)
        .debug(false)
        .warnings(false)
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args(&tirpc.cflags)
        .arg("-std=gnu99")
        .arg(format!("-I{}", out.display()))
        .arg(format!("-I{}", csrc.display()))
        // rpcgen declares variables it does not use.
        .arg("-Wno-unused-variable")
        .args(sources)
        .arg("-o")
        .arg(output)
        .args(&tirpc.libs);
    let result = cmd.output().expect("run the C compiler");
    if !result.status.success() {
        panic!(
            "building {} failed ({cmd:?}):\n{}{}",
            output.display(),
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        );
    }
}
