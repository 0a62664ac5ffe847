//! From text to [`ast::Specification`](crate::ast::Specification): preprocessing, lexing,
//! parsing. Nothing here panics, whatever the input; every problem becomes a diagnostic.
//!
//! Lexing and parsing are both `nom` combinators. The lexer's recognisers work on the text,
//! one per lexical class of RFC 4506 section 6.2. The grammar of section 6.3 works on the
//! tokens, through a nom input type over the token slice ([`parser`]); it recovers after an
//! error (skips to the next `;` or definition) to report every defect of a draft in one
//! run, and attaches rustc-style fix-it hints (a missing `{` or `=`, a typed constant) at
//! exact positions: a failure carries its finished diagnostic in nom's error type, and the
//! recovery points are parsers themselves.

pub mod lexer;
pub mod marks;
pub mod parser;
pub mod preproc;

use crate::ast::{Definition, FileId, Ident, Loc, Specification, Value};
use crate::diag::{Diagnostic, Diagnostics, Severity};

/// The result of parsing one file.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The definitions.
    pub spec: Specification,
    /// `#include "path"` directives found (path, location).
    pub includes: Vec<(String, Loc)>,
    /// Constants from `%#define NAME VALUE` pass-through lines whose value is a number or
    /// `NAME + number`: used only when the input refers to them without defining them.
    pub fallback: Vec<(Definition, Loc)>,
}

/// `%#define` values xdrgen understands: `N`, `0xN`, `NAME`, `NAME+N`, `NAME-N`.
fn c_define(name: &str, text: &str, loc: &Loc) -> Option<Definition> {
    let lit = |t: &str| -> Option<i128> {
        let t = t
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .trim();
        let lexed = lexer::lex(t);
        match (lexed.tokens.as_slice(), lexed.errors.is_empty()) {
            (
                [lexer::Token {
                    tok: lexer::Tok::Number(n),
                    ..
                }, _eof],
                true,
            ) => Some(*n),
            _ => None,
        }
    };
    let ident = |t: &str| -> Option<String> {
        let t = t.trim();
        (!t.is_empty()
            && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !t.starts_with(|c: char| c.is_ascii_digit()))
        .then(|| t.to_string())
    };
    let id = |n: String| Ident {
        name: n,
        loc: loc.clone(),
    };
    let value = if let Some(n) = lit(text) {
        Value::Lit {
            value: n,
            loc: loc.clone(),
        }
    } else if let Some(n) = ident(text) {
        Value::Name(id(n))
    } else {
        let (base, delta) = if let Some((a, b)) = text.split_once('+') {
            (a, lit(b)?)
        } else if let Some((a, b)) = text.split_once('-') {
            (a, -lit(b)?)
        } else {
            return None;
        };
        Value::Offset {
            base: id(ident(base)?),
            delta,
            loc: loc.clone(),
        }
    };
    Some(Definition::Const {
        name: id(name.to_string()),
        ty: None,
        value,
    })
}

/// Parses the text of one file, recording problems in `diags`.
pub fn parse_file(file: FileId, text: &str, lenient: bool, diags: &mut Diagnostics) -> Parsed {
    parse_file_with_defines(file, text, lenient, &[], diags)
}

/// [`parse_file`] with the macros `defined` (`--define`) set for `#ifdef` and `#if`.
pub fn parse_file_with_defines(
    file: FileId,
    text: &str,
    lenient: bool,
    defined: &[String],
    diags: &mut Diagnostics,
) -> Parsed {
    let pre = preproc::preprocess_with_defines(file, text, defined);
    for (loc, msg) in &pre.problems {
        diags.push(Diagnostic::error(msg.clone()).at(loc, "here"));
    }
    if let Some(first) = &pre.first_passthrough {
        diags.push(
            Diagnostic::new(
                Severity::Note,
                format!(
                    "ignored {} `%` pass-through line(s): they carry C code for rpcgen's output",
                    pre.passthrough_lines
                ),
            )
            .at(first, "the first one"),
        );
    }
    let lexed = lexer::lex(&pre.text);
    for (span, msg) in lexed.errors {
        diags.push(Diagnostic::error(msg).at(&Loc { file, span }, "here"));
    }
    for (span, look) in &lexed.lookalikes {
        let loc = Loc {
            file,
            span: span.clone(),
        };
        diags.push(look.diagnostic(&loc, lenient));
    }
    let spec = parser::parse(&lexed.tokens, file, lenient, diags);
    let fallback = pre
        .c_defines
        .iter()
        .filter_map(|(name, text, loc)| Some((c_define(name, text, loc)?, loc.clone())))
        .collect();
    Parsed {
        spec,
        includes: pre.includes,
        fallback,
    }
}
