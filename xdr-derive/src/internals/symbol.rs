//! The names of every `#[xdr(..)]` attribute, in one place, so that each is parsed, placed
//! and reported for duplicates the same way everywhere.

use core::fmt;

/// The name of one attribute key.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Symbol(pub &'static str);

/// The attribute namespace: `#[xdr(..)]`.
pub const XDR: Symbol = Symbol("xdr");
/// Container: path to the runtime crate, `#[xdr(crate = "my::rpcrdma")]`.
pub const CRATE: Symbol = Symbol("crate");
/// Container (unions): the discriminant type, `#[xdr(switch = u32)]`.
pub const SWITCH: Symbol = Symbol("switch");
/// Union arm: a discriminant value selecting it, `#[xdr(case = 3)]`; may repeat.
pub const CASE: Symbol = Symbol("case");
/// Union arm: the arm taken by every value no other arm names.
pub const DEFAULT: Symbol = Symbol("default");
/// Union arm field: holds the discriminant the arm was decoded with.
pub const DISCRIMINANT: Symbol = Symbol("discriminant");
/// Field: the declared maximum of a variable-length item, `opaque x<N>`.
pub const MAX: Symbol = Symbol("max");
/// Field: the length of a fixed-length item held in `Bytes` or `Vec`, `opaque x[N]`.
pub const FIXED: Symbol = Symbol("fixed");
/// Field: a `Vec` carrying a self-referential `*next` linked list.
pub const LIST: Symbol = Symbol("list");
/// Field: DDP-eligible (may move as an RDMA chunk, RFC 8166 section 6.1).
pub const DDP: Symbol = Symbol("ddp");

/// Every key, for the "expected one of" hint.
pub const ALL: &[Symbol] = &[
    CRATE,
    SWITCH,
    CASE,
    DEFAULT,
    DISCRIMINANT,
    MAX,
    FIXED,
    LIST,
    DDP,
];

impl PartialEq<Symbol> for syn::Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for &syn::Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
