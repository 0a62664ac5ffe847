//! From text to [`ast::Specification`](crate::ast::Specification): preprocessing, lexing,
//! parsing. Nothing here panics, whatever the input; every problem becomes a diagnostic.

pub mod lexer;
pub mod parser;
pub mod preproc;

use crate::ast::{FileId, Loc, Specification};
use crate::diag::{Diagnostic, Diagnostics, Severity};

/// The result of parsing one file.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The definitions.
    pub spec: Specification,
    /// `#include "path"` directives found (path, location).
    pub includes: Vec<(String, Loc)>,
}

/// Parses the text of one file, recording problems in `diags`.
pub fn parse_file(file: FileId, text: &str, lenient: bool, diags: &mut Diagnostics) -> Parsed {
    let pre = preproc::preprocess(file, text);
    for (loc, msg) in &pre.problems {
        diags.push(Diagnostic::error(msg.clone()).at(loc, "here"));
    }
    if pre.passthrough_lines > 0 {
        let mut d = Diagnostic::new(
            Severity::Note,
            format!(
                "ignored {} `%` pass-through line(s): they carry C code for rpcgen's output",
                pre.passthrough_lines
            ),
        );
        d.primary = Some((Loc { file, span: 0..0 }, String::new()));
        diags.push(d);
    }
    let (tokens, lex_errors) = lexer::lex(&pre.text);
    for (span, msg) in lex_errors {
        diags.push(Diagnostic::error(msg).at(&Loc { file, span }, "here"));
    }
    let spec = parser::Parser::new(&tokens, file, lenient, diags).specification();
    Parsed {
        spec,
        includes: pre.includes,
    }
}
