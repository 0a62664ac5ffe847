//! The `xdrgen` command line.
//!
//! ```text
//! xdrgen FILE.x... [-o OUT] [--lenient] [--no-services] [-D NAME=VALUE]...
//!                                                  generate Rust (one namespace, one output)
//! xdrgen check FILE.x... [--lenient] [-D NAME=VALUE]...   only report diagnostics
//! xdrgen extract DRAFT.txt [-o DIR] [--section N.N]... [--no-split]
//! xdrgen dissector FILE.x... [--v1 FILE.x]... [-o OUT.lua] [--lenient] [-D NAME=VALUE]...
//!                                                  a Wireshark Lua dissector for RPC-over-RDMA
//! ```
//! Exit codes: 0 success, 1 the input has errors, 2 usage or I/O error.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use codespan_reporting::term::termcolor::{ColorChoice, StandardStream};

/// XDR (RFC 4506) and ONC RPC (RFC 5531) compiler emitting zero-copy Rust codecs.
#[derive(Parser, Debug)]
#[command(name = "xdrgen", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    generate: GenerateArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and check the files; print diagnostics; generate nothing.
    Check(CheckArgs),
    /// Extract the XDR of an Internet-Draft's plain text into `.x` files.
    Extract(ExtractArgs),
    /// Write a Wireshark Lua dissector for RPC-over-RDMA from the XDR of its versions and
    /// extensions (e.g. `xdrgen dissector specs/common.x specs/baseops.x ext.x --v1
    /// specs/rpcrdma-v1.x -o rpcrdma.lua`).
    Dissector(DissectorArgs),
}

#[derive(Args, Debug)]
struct DissectorArgs {
    /// Input `.x` files; they form one namespace, in order (version 2: `common.x`,
    /// `baseops.x`, then extensions; or version 1 alone).
    #[arg(required = true, value_name = "FILE.x")]
    files: Vec<PathBuf>,
    /// Files compiled as a namespace of their own, for version 1 beside version 2 (both
    /// define `uint32`); repeatable, the files given together.
    #[arg(long = "v1", value_name = "FILE.x")]
    v1: Vec<PathBuf>,
    /// Output file (standard output if absent).
    #[arg(short, long, value_name = "OUT.lua")]
    output: Option<PathBuf>,
    /// Accept the known quirks of the RPC-over-RDMA drafts' XDR, with warnings.
    #[arg(long)]
    lenient: bool,
    /// Give constant NAME the value VALUE (as for generating Rust); repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    defines: Vec<String>,
}

#[derive(Args, Debug)]
struct ExtractArgs {
    /// The draft, as plain text.
    #[arg(value_name = "DRAFT.txt")]
    draft: PathBuf,
    /// Directory to write the `.x` files into (created if missing).
    #[arg(short, long, value_name = "DIR", default_value = ".")]
    output: PathBuf,
    /// Take the indented XDR of these numbered sections (old drafts without markers);
    /// repeatable, in order, e.g. `--section 4.2 --section 6.2`.
    #[arg(long = "section", value_name = "N.N")]
    sections: Vec<String>,
    /// With the `///` convention, keep one file instead of splitting at `FILE ENDS:` markers
    /// (what the draft's `sed` recipe alone gives).
    #[arg(long)]
    no_split: bool,
    /// Name of the output file where the draft does not name one (default: the draft's
    /// file name with `.x`).
    #[arg(long, value_name = "FILE.x")]
    name: Option<String>,
}

#[derive(Args, Debug)]
struct CommonArgs {
    /// Input `.x` files; they form one namespace, in order.
    #[arg(required = true, value_name = "FILE.x")]
    files: Vec<PathBuf>,
    /// Accept the known quirks of the RPC-over-RDMA drafts' XDR, with warnings.
    #[arg(long)]
    lenient: bool,
    /// Mark `Type.member` DDP-eligible (an Upper Layer Binding mark); repeatable.
    #[arg(long = "ddp", value_name = "TYPE.MEMBER")]
    ddp: Vec<String>,
    /// Read DDP marks from a binding file (one `Type.member` per line, `#` comments).
    #[arg(long = "binding", value_name = "FILE")]
    bindings: Vec<PathBuf>,
    /// Give constant NAME the value VALUE (an integer or a constant's name), for values real
    /// files take from C headers; a bare NAME is NAME=1. Also defines the macro for `#ifdef`.
    /// Repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    defines: Vec<String>,
    /// Name of the runtime crate the generated code refers to.
    #[arg(long, default_value = "rpcrdma", value_name = "CRATE")]
    runtime_crate: String,
    /// Codecs and procedure structs only: no typed client, server trait or `register` per
    /// program version (those need the runtime's `rpc` feature).
    #[arg(long)]
    no_services: bool,
}

#[derive(Args, Debug)]
struct GenerateArgs {
    #[command(flatten)]
    common: Option<CommonArgs>,
    /// Output file (standard output if absent).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[command(flatten)]
    common: CommonArgs,
}

fn config(c: &CommonArgs) -> rpcrdma_xdrgen::Config {
    let mut cfg = rpcrdma_xdrgen::Config::new();
    cfg.lenient(c.lenient)
        .runtime_crate(c.runtime_crate.clone())
        .services(!c.no_services);
    for mark in &c.ddp {
        cfg.ddp(mark.clone());
    }
    for path in &c.bindings {
        cfg.binding_file(path.clone());
    }
    for arg in &c.defines {
        let (name, value) = rpcrdma_xdrgen::defines::split_define(arg);
        cfg.define(name, value);
    }
    cfg
}

fn report(comp: &rpcrdma_xdrgen::Compilation) {
    let choice = if std::io::stderr().is_terminal() {
        ColorChoice::Auto
    } else {
        ColorChoice::Never
    };
    let mut err = StandardStream::stderr(choice);
    comp.sources.emit(&mut err, &comp.diagnostics.items);
    let n = comp.diagnostics.error_count();
    if n > 0 {
        let _ = writeln!(err, "error: {n} error(s); no output generated");
    }
}

fn run(common: &CommonArgs, output: Option<&PathBuf>, generate: bool) -> ExitCode {
    let comp = match config(common).check_files(&common.files) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    report(&comp);
    if comp.has_errors() {
        return ExitCode::from(1);
    }
    if !generate {
        return ExitCode::SUCCESS;
    }
    let code = match comp.generate() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    write_output(output, &code)
}

fn dissector(a: &DissectorArgs) -> ExitCode {
    let mut cfg = rpcrdma_xdrgen::Config::new();
    cfg.lenient(a.lenient);
    for arg in &a.defines {
        let (name, value) = rpcrdma_xdrgen::defines::split_define(arg);
        cfg.define(name, value);
    }
    let mut parts = Vec::new();
    for files in [&a.v1, &a.files] {
        if files.is_empty() {
            continue;
        }
        match cfg.check_files(files) {
            Ok(comp) => {
                report(&comp);
                if comp.has_errors() {
                    return ExitCode::from(1);
                }
                parts.push(comp);
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let refs: Vec<&rpcrdma_xdrgen::Compilation> = parts.iter().collect();
    let code = match rpcrdma_xdrgen::lua::generate(&refs) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    write_output(a.output.as_ref(), &code)
}

/// Writes `code` to `path` (only if it changed) or to standard output.
fn write_output(path: Option<&PathBuf>, code: &str) -> ExitCode {
    match path {
        Some(path) => {
            if let Err(e) = rpcrdma_xdrgen::write_if_changed(path, code) {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
        None => {
            if std::io::stdout().write_all(code.as_bytes()).is_err() {
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}

fn extract(a: &ExtractArgs) -> ExitCode {
    use rpcrdma_xdrgen::extract::{extract, Mode};
    let text = match std::fs::read_to_string(&a.draft) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", a.draft.display());
            return ExitCode::from(2);
        }
    };
    let mode = if !a.sections.is_empty() {
        Mode::Sections(a.sections.clone())
    } else if a.no_split {
        Mode::TripleSlash { split: false }
    } else {
        Mode::Auto
    };
    let name = a.name.clone().unwrap_or_else(|| {
        let stem = a
            .draft
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned());
        format!("{}.x", stem.unwrap_or_else(|| "extracted".into()))
    });
    let files = match extract(&text, &mode, &name) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {}: {e}", a.draft.display());
            return ExitCode::from(1);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&a.output) {
        eprintln!("error: {}: {e}", a.output.display());
        return ExitCode::from(2);
    }
    for f in files {
        // A name comes from the draft text: keep only its last component.
        let Some(file_name) = std::path::Path::new(&f.name).file_name() else {
            eprintln!(
                "error: the draft names an output file `{}` that is not a file name",
                f.name
            );
            return ExitCode::from(1);
        };
        let path = a.output.join(file_name);
        if let Err(e) = rpcrdma_xdrgen::write_if_changed(&path, &f.contents) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        println!("{}", path.display());
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(2),
            };
        }
    };
    match &cli.command {
        Some(Command::Check(a)) => run(&a.common, None, false),
        Some(Command::Extract(a)) => extract(a),
        Some(Command::Dissector(a)) => dissector(a),
        None => match &cli.generate.common {
            Some(common) => run(common, cli.generate.output.as_ref(), true),
            None => {
                eprintln!("error: no input files (try `xdrgen --help`)");
                ExitCode::from(2)
            }
        },
    }
}
