//! Constants given from outside the `.x` files (`--define NAME=VALUE`, [`Config::define`]):
//! the values real files take from C headers (`NFS_FHSIZE`, `MAXNAMELEN`), which rpcgen
//! gets from `cpp`. Each is also a macro for `#ifdef` / `#if`.
//!
//! A given constant is used where the input refers to the name without defining it, like
//! rpcgen's library types; an input that defines the name itself keeps its own value, with a
//! warning that the given one is unused.
//!
//! [`Config::define`]: crate::Config::define

use crate::ast::{Definition, FileId, Ident, Loc, Value};
use crate::diag::{Diagnostic, Diagnostics, Sources};
use crate::parse::lexer::{lex, Tok, Token};
use crate::parse::parser::is_reserved;

/// The display name of the source holding the given constants, one `NAME=VALUE` a line.
pub const DEFINE_SOURCE: &str = "<--define>";

/// The given constants, read.
#[derive(Debug, Default)]
pub(crate) struct Defined {
    /// Every given name, for `#ifdef`.
    pub names: Vec<String>,
    /// The constants whose name and value are well formed, located in [`DEFINE_SOURCE`].
    pub consts: Vec<(Definition, Loc)>,
}

/// Reads `defines` (name, value) into a new source of `sources`; a malformed one becomes an
/// error pointing at it.
pub(crate) fn read(
    defines: &[(String, String)],
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Defined {
    let mut out = Defined::default();
    if defines.is_empty() {
        return out;
    }
    let text: String = defines
        .iter()
        .map(|(name, value)| format!("{name}={value}\n"))
        .collect();
    let file = sources.add(DEFINE_SOURCE, text);
    let mut offset = 0;
    for (name, value) in defines {
        let name_loc = Loc {
            file,
            span: offset..offset + name.len(),
        };
        let value_start = offset + name.len() + 1;
        let value_loc = Loc {
            file,
            span: value_start..value_start + value.len(),
        };
        offset = value_start + value.len() + 1;
        out.names.push(name.clone());
        if !is_identifier(name) {
            diags.push(
                Diagnostic::error(format!("`--define {name}=...`: not a constant name"))
                    .at(&name_loc, "expected an identifier that is not a keyword")
                    .help("write `--define NAME=VALUE`, e.g. `--define NFS_FHSIZE=32`"),
            );
            continue;
        }
        let Some(value) = parse_value(value, &value_loc) else {
            diags.push(
                Diagnostic::error(format!(
                    "`--define {name}={value}`: the value is not an integer or a constant's name"
                ))
                .at(
                    &value_loc,
                    "expected e.g. `32`, `0x20`, `-1` or `OTHER_CONSTANT`",
                ),
            );
            continue;
        };
        let ident = Ident {
            name: name.clone(),
            loc: name_loc.clone(),
        };
        out.consts.push((
            Definition::Const {
                name: ident,
                ty: None,
                value,
            },
            name_loc.to(&value_loc),
        ));
    }
    out
}

/// Splits a command-line `NAME=VALUE` (a bare `NAME` is `NAME=1`, as with `cc -D`).
pub fn split_define(arg: &str) -> (String, String) {
    match arg.split_once('=') {
        Some((name, value)) => (name.trim().to_string(), value.trim().to_string()),
        None => (arg.trim().to_string(), "1".to_string()),
    }
}

fn is_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !is_reserved(name)
}

/// A literal (decimal, hex, octal, possibly negative) or a constant's name.
fn parse_value(text: &str, loc: &Loc) -> Option<Value> {
    let lexed = lex(text);
    if !lexed.errors.is_empty() {
        return None;
    }
    let toks = lexed.tokens;
    let toks: Vec<&Tok> = toks.iter().map(|Token { tok, .. }| tok).collect();
    let lit = |value: i128| Value::Lit {
        value,
        loc: loc.clone(),
    };
    match toks.as_slice() {
        [Tok::Number(n), Tok::Eof] => Some(lit(*n)),
        [Tok::Punct('-'), Tok::Number(n), Tok::Eof] => Some(lit(-*n)),
        [Tok::Ident(s), Tok::Eof] if is_identifier(s) => Some(Value::Name(Ident {
            name: s.clone(),
            loc: loc.clone(),
        })),
        _ => None,
    }
}

/// Whether `file` is the source of the given constants.
pub(crate) fn is_define_source(sources: &Sources, file: FileId) -> bool {
    sources.name(file) == DEFINE_SOURCE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_one(name: &str, value: &str) -> (Defined, Diagnostics) {
        let mut sources = Sources::new();
        let mut diags = Diagnostics::default();
        let d = read(
            &[(name.to_string(), value.to_string())],
            &mut sources,
            &mut diags,
        );
        (d, diags)
    }

    #[test]
    fn accepts_literals_and_names() {
        for (value, expected) in [("32", Some(32)), ("0x20", Some(32)), ("-1", Some(-1))] {
            let (d, diags) = read_one("N", value);
            assert!(!diags.has_errors(), "{diags:?}");
            let Definition::Const { value, .. } = &d.consts[0].0 else {
                panic!("not a constant")
            };
            assert!(matches!(value, Value::Lit { value, .. } if Some(*value) == expected));
        }
        let (d, _) = read_one("N", "OTHER");
        assert!(matches!(
            &d.consts[0].0,
            Definition::Const { value: Value::Name(n), .. } if n.name == "OTHER"
        ));
    }

    #[test]
    fn rejects_bad_names_and_values() {
        for (name, value) in [
            ("1N", "2"),
            ("int", "2"),
            ("N", "1 + 2"),
            ("N", ""),
            ("N", "\"s\""),
        ] {
            let (d, diags) = read_one(name, value);
            assert!(d.consts.is_empty(), "{name}={value}");
            assert_eq!(diags.error_count(), 1, "{name}={value}");
        }
    }

    #[test]
    fn bare_name_is_one() {
        assert_eq!(split_define("X"), ("X".into(), "1".into()));
        assert_eq!(split_define("X=0x10"), ("X".into(), "0x10".into()));
    }
}
