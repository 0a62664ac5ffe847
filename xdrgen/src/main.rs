//! The `xdrgen` command line.
//!
//! ```text
//! xdrgen FILE.x... [-o OUT] [--lenient]   generate Rust (one namespace, one output)
//! xdrgen check FILE.x... [--lenient]      only report diagnostics
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
    /// Name of the runtime crate the generated code refers to.
    #[arg(long, default_value = "rpcrdma", value_name = "CRATE")]
    runtime_crate: String,
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

fn config(c: &CommonArgs) -> xdrgen::Config {
    let mut cfg = xdrgen::Config::new();
    cfg.lenient(c.lenient)
        .runtime_crate(c.runtime_crate.clone());
    for mark in &c.ddp {
        cfg.ddp(mark.clone());
    }
    for path in &c.bindings {
        cfg.binding_file(path.clone());
    }
    cfg
}

fn report(comp: &xdrgen::Compilation) {
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
    match output {
        Some(path) => {
            if let Err(e) = xdrgen::write_if_changed(path, &code) {
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
        None => match &cli.generate.common {
            Some(common) => run(common, cli.generate.output.as_ref(), true),
            None => {
                eprintln!("error: no input files (try `xdrgen --help`)");
                ExitCode::from(2)
            }
        },
    }
}
