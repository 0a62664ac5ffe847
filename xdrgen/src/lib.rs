//! `xdrgen`: an XDR (RFC 4506) and ONC RPC (RFC 5531) compiler that emits zero-copy Rust
//! codecs for the `rpcrdma::xdr` runtime, with a typed client and a server trait per program
//! version for `rpcrdma::rpc`.
//!
//! This is its library, for build scripts in the manner of `prost-build`; the package also
//! installs the `xdrgen` command (`cargo install rpcrdma-xdrgen`). The `rpcrdma` crate's
//! documentation is a guide from a `.x` file to a program served and called over
//! RPC-over-RDMA and TCP.
//!
//! ```toml
//! [build-dependencies]
//! rpcrdma-xdrgen = "0.1"
//! ```
//!
//! ```no_run
//! // build.rs
//! rpcrdma_xdrgen::Config::new()
//!     .lenient(false)
//!     .runtime_crate("rpcrdma")
//!     .output_file("rpcrdma_v1.rs")
//!     .compile(&["../../specs/rpcrdma-v1.x"])
//!     .unwrap();
//! ```
//!
//! Phases: [`parse`] (preprocess, lex, parse into [`ast`]), [`check`] (names, constants,
//! types, recursion, linked lists, into the [`ir::Model`]), [`rust`] (tokens, formatted by
//! prettyplease). Every problem is a [`diag::Diagnostic`] rendered rustc-style. The same
//! model also makes a Wireshark dissector for RPC-over-RDMA ([`lua`], `xdrgen dissector`).
//!
//! # Rust shapes
//!
//! | XDR | Rust |
//! |---|---|
//! | `const X = 5;` | `pub const X: u32 = 5;` typed by use (a size: `u32`; a case label: the switch type), else the smallest of `u32`/`i32`/`u64`/`i64` |
//! | `enum E {..}` | `#[repr(i32)] enum E`, unknown values fail with `ErrorKind::UnknownDiscriminant` |
//! | `struct S {..}` | `struct S` with `pub` snake_case fields |
//! | `union U switch (..)` | `enum U`: one variant per case label (named after the label, `Case5` for literals), `Default { discriminant, value }` |
//! | `opaque x[N]` / `opaque x<N>` | `Bytes` (length checked on encode and decode) |
//! | `string x<N>` | `XdrString` |
//! | `T x[N]` / `T x<N>` | `[T; N]` / `Vec<T>` |
//! | `T *x` | `Option<T>` (`Option<Box<T>>` when recursive; a union arm leading back to its union holds `Box<T>`) |
//! | `struct L { ..; L *next; }` | `struct L` without `next`; `L *x` is `Vec<L>`, `L x` a non-empty `Vec<L>`; `type LItem = L` when the name ends in `list` |
//! | `typedef` | `type` alias, or a newtype when the declaration carries a size or list form |
//! | (any of the above) | `Default` where a default value exists and encodes (enums: the zero member, else the first; unions: when 0 selects an arm) |
//! | `program P { version V { R PROC(A) = n; } = v; } = p;` | `mod p { mod v { struct Proc; impl Procedure for Proc } }` |
//! | the same, with [`Config::services`] (default) | also in `mod v`: a client `VClient` (`async fn proc(&self, args: A) -> Result<R, rpc::Error>`), a server trait `VServer` (`fn proc(&self, ctx: CallContext, args: A) -> impl Future<Output = Result<R, ReplyError>> + Send`), `register(&mut ServerBuilder, impl VServer)` and `register_arc` |
//!
//! # Services
//!
//! Every program version's module holds, besides its procedure structs, a typed async client
//! (`NfsV3Client::nfsproc3_read(&self, args)`), a server trait with one method per procedure
//! that implementations write as `async fn` (`NfsV3Server`), and `register` / `register_arc`,
//! which host an implementation on an `rpcrdma::rpc::ServerBuilder` through a generated
//! `rpc::Service` (unknown procedures: PROC_UNAVAIL; arguments that do not decode:
//! GARBAGE_ARGS). They need the runtime's `rpc` feature; [`Config::services`]`(false)` (CLI
//! `--no-services`) leaves them out. Each `Procedure` impl whose result can carry DDP-eligible
//! items says how many (`RESULT_DDP_ITEMS`: one element of a variable-length array or list
//! counted). The crate's README has the naming rules and an example.
#![warn(missing_docs)]

pub mod ast;
pub mod binding;
pub mod check;
pub mod defines;
pub mod diag;
pub mod extract;
pub mod ir;
pub mod lua;
pub mod parse;
pub mod rust;
mod siblings;

use std::fmt;
use std::path::{Path, PathBuf};

use diag::{Diagnostic, Diagnostics, Severity, Sources};

/// Why a compilation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The input has errors; `rendered` holds the rustc-style report.
    Diagnostics {
        /// The rendered diagnostics (errors and warnings).
        rendered: String,
        /// How many errors.
        errors: usize,
    },
    /// Reading an input or writing the output failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// No output directory: neither `out_dir` nor the `OUT_DIR` environment variable is set.
    NoOutDir,
    /// The input cannot make a Wireshark dissector ([`lua`]): no RPC-over-RDMA header, or a
    /// name defined differently by two parts.
    Dissector(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Diagnostics { rendered, .. } => f.write_str(rendered),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::NoOutDir => f.write_str(
                "no output directory: call Config::out_dir or run from a build script (OUT_DIR)",
            ),
            Error::Dissector(why) => write!(f, "error: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The result of [`Config::check_sources`]: everything needed to report and to generate.
#[derive(Debug)]
pub struct Compilation {
    /// All source files (inputs and included files).
    pub sources: Sources,
    /// All diagnostics.
    pub diagnostics: Diagnostics,
    /// The checked model (meaningful when there are no errors).
    pub model: ir::Model,
    /// The input names, for the generated header.
    pub inputs: Vec<String>,
    /// Paths read from disk (inputs and includes), for `cargo:rerun-if-changed`.
    pub paths: Vec<PathBuf>,
    runtime: String,
    services: bool,
}

impl Compilation {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.has_errors()
    }

    /// The diagnostics rendered rustc-style (no colour).
    pub fn render(&self) -> String {
        self.sources.render(&self.diagnostics.items)
    }

    /// The generated Rust source, or the diagnostics if there are errors.
    pub fn generate(&self) -> Result<String, Error> {
        if self.has_errors() {
            return Err(Error::Diagnostics {
                rendered: self.render(),
                errors: self.diagnostics.error_count(),
            });
        }
        Ok(rust::generate(
            &self.model,
            &self.sources,
            &rust::GenOptions {
                runtime: &self.runtime,
                inputs: self
                    .inputs
                    .iter()
                    .map(|i| diag::short_name(i).to_string())
                    .collect(),
                services: self.services,
            },
        ))
    }
}

impl Compilation {
    /// A Wireshark Lua dissector for this namespace alone ([`lua::generate`] for several).
    pub fn generate_lua(&self) -> Result<String, Error> {
        lua::generate(&[self])
    }
}

/// Compiler settings, in the style of `prost_build::Config`.
#[derive(Debug, Clone)]
pub struct Config {
    lenient: bool,
    runtime_crate: String,
    out_dir: Option<PathBuf>,
    output_file: Option<String>,
    ddp_marks: Vec<String>,
    binding_files: Vec<PathBuf>,
    services: bool,
    defines: Vec<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lenient: false,
            runtime_crate: "rpcrdma".into(),
            out_dir: None,
            output_file: None,
            ddp_marks: Vec::new(),
            binding_files: Vec::new(),
            services: true,
            defines: Vec::new(),
        }
    }
}

/// Types and constants rpcgen output gets from the C library (`<rpc/xdr.h>`, `<rpc/auth.h>`,
/// `<rpc/auth_des.h>`), added when an input uses
/// them without defining them.
const PRELUDE: &str =
    "typedef opaque netobj<1024>;\ntypedef opaque des_block[8];\nconst MAXNETNAMELEN = 255;\n";

/// The most nested `#include` accepted.
const MAX_INCLUDE_DEPTH: usize = 16;

impl Config {
    /// Default settings: strict, runtime crate `rpcrdma`, output in `OUT_DIR`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts the known quirks of the RPC-over-RDMA drafts' XDR (with warnings): typed
    /// constants, a missing `=` or `{`, several declarations in one union arm (an anonymous
    /// struct), an unnamed discriminant, `uint32`/`uint64`/`int32`/`int64` without a typedef,
    /// a reversed typedef, a type named differently where it is used (only when the field
    /// using it is named after an unused definition of the kind the uses need, as in
    /// `rpcrdma1_body rdma_body;` with `union rdma_body`: a definition whose name merely
    /// resembles the unknown one is suggested, never substituted, since nothing says the two
    /// are encoded alike), an undefined type used only as a discriminant or constant type
    /// (read as `unsigned int`), repeated enum values (aliases), the xdrzcc dialect's
    /// `zcopaque` (read as `opaque` with a DDP mark), and a DDP mark written off-form
    /// (`/* @DDP */`, `/* @ ddp */`: read as `/* @ddp */`; a misspelled one such as
    /// `/* @dpd */` is a warning and no mark).
    ///
    /// ```
    /// let mut c = rpcrdma_xdrgen::Config::new();
    /// c.lenient(true);
    /// let out = c.check_sources(&[("d.x", "const uint32 X = 1;")]).generate().unwrap();
    /// assert!(out.contains("pub const X: u32 = 1;"));
    /// ```
    pub fn lenient(&mut self, lenient: bool) -> &mut Self {
        self.lenient = lenient;
        self
    }

    /// Marks `Type.member` DDP-eligible, as an Upper Layer Binding would (seed 004 section
    /// 6.1): the member of a struct or union arm may move as an RDMA chunk. Same effect as a
    /// `/* @ddp */` comment before its declaration, or a line of a binding file.
    ///
    /// ```
    /// let out = rpcrdma_xdrgen::Config::new()
    ///     .ddp("write_args.data")
    ///     .check_sources(&[("w.x", "struct write_args { unsigned off; opaque data<>; };")])
    ///     .generate()
    ///     .unwrap();
    /// assert!(out.contains("put_ddp_opaque"));
    /// ```
    pub fn ddp(&mut self, mark: impl Into<String>) -> &mut Self {
        self.ddp_marks.push(mark.into());
        self
    }

    /// Gives constant `name` the value `value` (an integer, decimal, `0x` hex or `0` octal,
    /// possibly negative, or another constant's name), as `cpp -D` gives rpcgen the values
    /// real files take from C headers (`NFS_FHSIZE`, `MAXNAMELEN`). It is used where an
    /// input refers to `name` without defining it (an input's own definition wins, with a
    /// warning), and `#ifdef name` holds. CLI: `--define NAME=VALUE`.
    ///
    /// ```
    /// let out = rpcrdma_xdrgen::Config::new()
    ///     .define("FHSIZE", "32")
    ///     .check_sources(&[("f.x", "typedef opaque fh[FHSIZE];")])
    ///     .generate()
    ///     .unwrap();
    /// assert!(out.contains("pub const FHSIZE: u32 = 32;"));
    /// ```
    pub fn define(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.defines.push((name.into(), value.into()));
        self
    }

    /// Reads DDP marks from a binding file (one `Type.member` per line, `#` comments; see
    /// [`binding`]).
    pub fn binding_file(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.binding_files.push(path.into());
        self
    }

    /// The crate generated code refers to as `::NAME::xdr::...` (default `rpcrdma`).
    ///
    /// ```
    /// let out = rpcrdma_xdrgen::Config::new()
    ///     .runtime_crate("my_runtime")
    ///     .check_sources(&[("a.x", "struct s { int a; };")])
    ///     .generate()
    ///     .unwrap();
    /// assert!(out.contains("::my_runtime::xdr::Encode"));
    /// ```
    pub fn runtime_crate(&mut self, name: impl Into<String>) -> &mut Self {
        self.runtime_crate = name.into();
        self
    }

    /// Whether every `version` of a `program` also gets a typed async client
    /// (`NfsV3Client`), a server trait with one async method per procedure (`NfsV3Server`)
    /// and `register` / `register_arc` functions that host an implementation on a
    /// `ServerBuilder` (default: on). That code uses the runtime's `rpc` module (the
    /// `rpcrdma` feature `rpc`); turn it off for codecs alone. The procedure structs
    /// (`impl Procedure`) are generated either way.
    ///
    /// ```
    /// let x = "program P { version V { int GET(void) = 1; } = 1; } = 0x20000001;";
    /// let with = rpcrdma_xdrgen::Config::new().check_sources(&[("p.x", x)]).generate().unwrap();
    /// assert!(with.contains("pub trait VServer"));
    /// let without = rpcrdma_xdrgen::Config::new()
    ///     .services(false)
    ///     .check_sources(&[("p.x", x)])
    ///     .generate()
    ///     .unwrap();
    /// assert!(!without.contains("VServer"));
    /// assert!(without.contains("impl ::rpcrdma::xdr::Procedure for Get"));
    /// ```
    pub fn services(&mut self, services: bool) -> &mut Self {
        self.services = services;
        self
    }

    /// The directory to write to (default: the `OUT_DIR` environment variable).
    ///
    /// ```
    /// let dir = std::env::temp_dir();
    /// rpcrdma_xdrgen::Config::new().out_dir(&dir);
    /// ```
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The output file name (default: the stem of the last input, `-` replaced by `_`, `.rs`).
    ///
    /// ```
    /// rpcrdma_xdrgen::Config::new().output_file("rpcrdma_v1.rs");
    /// ```
    pub fn output_file(&mut self, name: impl Into<String>) -> &mut Self {
        self.output_file = Some(name.into());
        self
    }

    /// Compiles `inputs` (one namespace) into one Rust file in the output directory, written
    /// only if its content changed. Prints `cargo:rerun-if-changed=` for every file read and
    /// `cargo:warning=` for every warning.
    pub fn compile(&self, inputs: &[impl AsRef<Path>]) -> Result<(), Error> {
        let comp = self.check_files(inputs)?;
        for p in &comp.paths {
            println!("cargo:rerun-if-changed={}", p.display());
        }
        for d in &comp.diagnostics.items {
            if d.severity == Severity::Warning {
                let at = d
                    .primary
                    .as_ref()
                    .map(|(l, _)| {
                        let (line, col) = comp.sources.line_col(l.file, l.span.start);
                        format!("{}:{line}:{col}: ", comp.sources.name(l.file))
                    })
                    .unwrap_or_default();
                println!("cargo:warning={at}{}", d.message);
            }
        }
        let code = comp.generate()?;
        let dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(Error::NoOutDir)?,
        };
        let name = match &self.output_file {
            Some(n) => n.clone(),
            None => default_output_name(inputs.last().map(|p| p.as_ref())),
        };
        write_if_changed(&dir.join(name), &code)
    }

    /// A Wireshark Lua dissector ([`lua`]) from `parts`, each a list of files compiled
    /// together: version 1 and version 2 (with its extensions) are separate parts, since
    /// both define `uint32`.
    ///
    /// ```no_run
    /// let lua = rpcrdma_xdrgen::Config::new()
    ///     .dissector(&[
    ///         &["specs/rpcrdma-v1.x"][..],
    ///         &["specs/common.x", "specs/baseops.x"][..],
    ///     ])
    ///     .unwrap();
    /// std::fs::write("rpcrdma.lua", lua).unwrap();
    /// ```
    pub fn dissector<P: AsRef<Path>>(&self, parts: &[&[P]]) -> Result<String, Error> {
        let comps = parts
            .iter()
            .map(|files| self.check_files(files))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Compilation> = comps.iter().collect();
        lua::generate(&refs)
    }

    /// Reads, parses and checks `inputs` (following `#include "..."`).
    pub fn check_files(&self, inputs: &[impl AsRef<Path>]) -> Result<Compilation, Error> {
        let mut loader = Loader {
            lenient: self.lenient,
            defined: self.defines.iter().map(|(n, _)| n.clone()).collect(),
            sources: Sources::new(),
            diags: Diagnostics::default(),
            specs: Vec::new(),
            paths: Vec::new(),
            fallback: Vec::new(),
        };
        for input in inputs {
            let path = input.as_ref();
            let text = read_text(path).map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?;
            loader.load(path, text, 0);
        }
        let mut comp = self.finish(
            loader,
            inputs
                .iter()
                .map(|p| p.as_ref().display().to_string())
                .collect(),
        );
        let notes = siblings::hints(&comp.model.unresolved, &comp.sources, &comp.paths);
        if !notes.is_empty() {
            comp.diagnostics.items.extend(notes);
            comp.diagnostics.tidy();
        }
        Ok(comp)
    }

    /// Parses and checks in-memory sources `(name, text)` (includes are not followed).
    pub fn check_sources(&self, inputs: &[(&str, &str)]) -> Compilation {
        let mut loader = Loader {
            lenient: self.lenient,
            defined: self.defines.iter().map(|(n, _)| n.clone()).collect(),
            sources: Sources::new(),
            diags: Diagnostics::default(),
            specs: Vec::new(),
            paths: Vec::new(),
            fallback: Vec::new(),
        };
        for (name, text) in inputs {
            let id = loader.sources.add(*name, *text);
            let parsed = parse::parse_file_with_defines(
                id,
                text,
                self.lenient,
                &loader.defined,
                &mut loader.diags,
            );
            for (inc, loc) in parsed.includes {
                loader.diags.push(
                    Diagnostic::warning(format!(
                        "`#include \"{inc}\"` not followed for in-memory input"
                    ))
                    .at(&loc, "ignored"),
                );
            }
            loader.specs.push(parsed.spec);
            loader.fallback.extend(parsed.fallback);
        }
        self.finish(loader, inputs.iter().map(|(n, _)| n.to_string()).collect())
    }

    fn finish(&self, mut loader: Loader, inputs: Vec<String>) -> Compilation {
        let prelude_id = loader.sources.add(check::PRELUDE_FILE, PRELUDE);
        let mut scratch = Diagnostics::default();
        let library = parse::parse_file(prelude_id, PRELUDE, false, &mut scratch).spec;
        // Given constants first: they win over the library's and the `%#define` lines'.
        let given = defines::read(&self.defines, &mut loader.sources, &mut loader.diags);
        let mut prelude = ast::Specification {
            definitions: given.consts,
        };
        prelude.definitions.extend(library.definitions);
        prelude.definitions.append(&mut loader.fallback);
        let mut model = check::check(
            &loader.specs,
            &prelude,
            &loader.sources,
            self.lenient,
            &mut loader.diags,
        );
        let marks = self.external_marks(&mut loader);
        check::ddp::apply_marks(&mut model, &marks, &mut loader.diags);
        loader.diags.tidy();
        Compilation {
            sources: loader.sources,
            diagnostics: loader.diags,
            model,
            inputs,
            paths: loader.paths,
            runtime: self.runtime_crate.clone(),
            services: self.services,
        }
    }
}

impl Config {
    /// Marks from binding files and [`Config::ddp`], located in their own source texts so
    /// diagnostics can point at them.
    fn external_marks(&self, loader: &mut Loader) -> Vec<check::ddp::ExternalMark> {
        let mut texts = Vec::new();
        for path in &self.binding_files {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    loader.paths.push(path.clone());
                    texts.push((path.display().to_string(), text));
                }
                Err(e) => loader.diags.push(Diagnostic::error(format!(
                    "cannot read binding file `{}`: {e}",
                    path.display()
                ))),
            }
        }
        if !self.ddp_marks.is_empty() {
            texts.push(("<--ddp>".to_string(), self.ddp_marks.join("\n") + "\n"));
        }
        let mut marks = Vec::new();
        for (name, text) in texts {
            let file = loader.sources.add(name, text.clone());
            match binding::parse_binding(&text) {
                Ok(found) => marks.extend(found.into_iter().map(|m| check::ddp::ExternalMark {
                    type_name: m.type_name,
                    member: m.member,
                    loc: ast::Loc { file, span: m.span },
                })),
                Err(e) => loader.diags.push(
                    Diagnostic::error(e.message)
                        .at(&ast::Loc { file, span: e.span }, "not a DDP mark")
                        .help("write one `Type.member` per line; `#` starts a comment"),
                ),
            }
        }
        marks
    }
}

struct Loader {
    lenient: bool,
    /// The names given with `--define`, for `#ifdef`.
    defined: Vec<String>,
    sources: Sources,
    diags: Diagnostics,
    specs: Vec<ast::Specification>,
    paths: Vec<PathBuf>,
    fallback: Vec<(ast::Definition, ast::Loc)>,
}

impl Loader {
    fn load(&mut self, path: &Path, text: String, depth: usize) {
        let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if self.paths.contains(&canon) {
            return;
        }
        self.paths.push(canon);
        let id = self.sources.add(path.display().to_string(), text.clone());
        let parsed =
            parse::parse_file_with_defines(id, &text, self.lenient, &self.defined, &mut self.diags);
        for (inc, loc) in parsed.includes {
            let inc_path = path.parent().unwrap_or(Path::new(".")).join(&inc);
            if depth >= MAX_INCLUDE_DEPTH {
                self.diags.push(
                    Diagnostic::error("`#include` nested too deeply").at(&loc, "include cycle?"),
                );
                continue;
            }
            match read_text(&inc_path) {
                Ok(t) => self.load(&inc_path, t, depth + 1),
                Err(e) => self.diags.push(
                    Diagnostic::error(format!("cannot read `{}`: {e}", inc_path.display()))
                        .at(&loc, "included here"),
                ),
            }
        }
        self.specs.push(parsed.spec);
        self.fallback.extend(parsed.fallback);
    }
}

/// Reads a file as text; bytes that are not UTF-8 (Latin-1 in old comments) become U+FFFD.
fn read_text(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The default output name: the stem of `last` with `-` replaced by `_`, plus `.rs`.
pub fn default_output_name(last: Option<&Path>) -> String {
    let stem = last
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().replace('-', "_"))
        .unwrap_or_else(|| "xdr".into());
    format!("{stem}.rs")
}

/// Writes `content` to `path` unless the file already holds exactly that.
pub fn write_if_changed(path: &Path, content: &str) -> Result<(), Error> {
    if std::fs::read(path).is_ok_and(|old| old == content.as_bytes()) {
        return Ok(());
    }
    std::fs::write(path, content).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// `Config::new().compile(inputs)`.
pub fn compile(inputs: &[impl AsRef<Path>]) -> Result<(), Error> {
    Config::new().compile(inputs)
}
