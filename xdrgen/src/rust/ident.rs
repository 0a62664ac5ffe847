//! Rust names for XDR names, in one place: case conversion (`heck`), raw identifiers for
//! keywords, renaming where raw identifiers are not allowed, and leading digits.
//!
//! * types and variants: `UpperCamelCase`; `Self` becomes `Self_`; a leading digit gets a `T`.
//! * fields and modules: `snake_case`; keywords become raw identifiers (`r#type`), except
//!   `self`, `super`, `crate` and `Self`, which cannot be raw and get a `_` suffix (`self_`);
//!   a leading digit gets a `_` prefix.
//! * constants: `SHOUTY_SNAKE_CASE`.

use heck::{ToShoutySnakeCase, ToSnakeCase, ToUpperCamelCase};
use proc_macro2::{Ident, Span};

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

const NOT_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];

fn make(name: &str) -> Ident {
    if NOT_RAW.contains(&name) {
        Ident::new(&format!("{name}_"), Span::call_site())
    } else if KEYWORDS.contains(&name) {
        Ident::new_raw(name, Span::call_site())
    } else {
        Ident::new(name, Span::call_site())
    }
}

fn clean(s: String, prefix: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        format!("{prefix}x")
    } else if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("{prefix}{s}")
    } else {
        s
    }
}

/// The Rust type name for an XDR type name.
pub fn type_name(xdr: &str) -> Ident {
    make(&type_name_str(xdr))
}

/// [`type_name`] as a string (`Self` already renamed to `Self_`).
pub fn type_name_str(xdr: &str) -> String {
    let s = clean(xdr.to_upper_camel_case(), "T");
    if s == "Self" {
        "Self_".into()
    } else {
        s
    }
}

/// The Rust field, function or module name for an XDR name.
pub fn field_name(xdr: &str) -> Ident {
    make(&clean(xdr.to_snake_case(), "_"))
}

/// The Rust function or method name for an XDR name, as a string: `snake_case`, with `self`,
/// `super`, `crate` and `_` already renamed (`self_`) so that names can be made unique before
/// they become identifiers with [`ident`] (keywords become raw identifiers there).
pub fn fn_name_str(xdr: &str) -> String {
    let s = clean(xdr.to_snake_case(), "_");
    if NOT_RAW.contains(&s.as_str()) {
        format!("{s}_")
    } else {
        s
    }
}

/// An identifier for a name already converted by this module (`*_str` functions, [`unique`]):
/// keywords become raw identifiers.
pub fn ident(name: &str) -> Ident {
    make(name)
}

/// The Rust constant name for an XDR constant name.
pub fn const_name(xdr: &str) -> Ident {
    make(&clean(xdr.to_shouty_snake_case(), "_"))
}

/// Makes names unique by appending `_2`, `_3`, ... to later duplicates.
pub fn unique(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        let mut candidate = n.clone();
        let mut k = 2;
        while out.contains(&candidate) {
            candidate = format!("{n}{k}");
            k += 1;
        }
        out.push(candidate);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            type_name("rpcrdma1_read_list").to_string(),
            "Rpcrdma1ReadList"
        );
        assert_eq!(type_name("self").to_string(), "Self_");
        assert_eq!(type_name("3com").to_string(), "T3com");
        assert_eq!(field_name("type").to_string(), "r#type");
        assert_eq!(field_name("self").to_string(), "self_");
        assert_eq!(field_name("super").to_string(), "super_");
        assert_eq!(field_name("rdmaXid").to_string(), "rdma_xid");
        assert_eq!(field_name("1st").to_string(), "_1st");
        assert_eq!(const_name("maxNameLen").to_string(), "MAX_NAME_LEN");
        assert_eq!(unique(vec!["A".into(), "A".into()]), vec!["A", "A2"]);
        assert_eq!(fn_name_str("NFSPROC3_READ"), "nfsproc3_read");
        assert_eq!(fn_name_str("self"), "self_");
        assert_eq!(ident(&fn_name_str("TYPE")).to_string(), "r#type");
    }
}
