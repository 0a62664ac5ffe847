//! Recovery points: report a failed construct and skip to where parsing can go on.

use super::input::{PResult, Tokens};
use super::DEF_KEYWORDS;
use crate::parse::lexer::Tok;

/// A recovery point: `p`, or, when it fails, its diagnostic recorded and `skip` run from
/// where it stopped (`None`).
pub(super) fn recovering<'a, O>(
    what: &'static str,
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
    mut skip: impl FnMut(Tokens<'a>) -> PResult<'a, ()>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, Option<O>> {
    move |i| match p(i) {
        Ok((i, o)) => Ok((i, Some(o))),
        Err(e) => {
            let (i, ()) = skip(i.report(e, what))?;
            Ok((i, None))
        }
    }
}

/// Skips the rest of a failed definition: to just after the next `;` at brace depth 0, or
/// to the next definition keyword that follows a `;` or `}` (a keyword after anything else
/// is `struct X` used as a type).
pub(super) fn recover_top(i: Tokens) -> PResult<()> {
    skip(i, false, true)
}

/// Skips the rest of a failed field: to just after the next `;` of the body, or to its
/// closing `}` (not consumed).
pub(super) fn recover_in_body(i: Tokens) -> PResult<()> {
    skip(i, true, false)
}

/// Skips the rest of a failed definition inside a namespace: as [`recover_top`], but also
/// to the namespace's closing `}` (not consumed).
pub(super) fn recover_in_namespace(i: Tokens) -> PResult<()> {
    skip(i, true, true)
}

/// The one skipping loop behind the recovery points: to just after the next `;` at brace
/// depth 0; with `at_close`, to the enclosing `}` (not consumed); with `at_definition`, to a
/// definition keyword at depth 0 that follows a `;` or `}`. A loop rather than a grammar of
/// balanced braces, so that hostile nesting cannot exhaust the stack.
fn skip(i: Tokens, at_close: bool, at_definition: bool) -> PResult<()> {
    let mut depth = 0i32;
    let mut i = i;
    loop {
        i = i.skip_annotations();
        match i.tok() {
            Tok::Eof => return Ok((i, ())),
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') if at_close && depth == 0 => return Ok((i, ())),
            Tok::Punct('}') => depth -= 1,
            Tok::Punct(';') if depth <= 0 => return Ok((i.advance(), ())),
            Tok::Ident(w)
                if at_definition
                    && depth <= 0
                    && DEF_KEYWORDS.contains(&w.as_str())
                    && matches!(
                        i.prev().map(|t| &t.tok),
                        Some(Tok::Punct(';') | Tok::Punct('}'))
                    ) =>
            {
                return Ok((i, ()))
            }
            _ => {}
        }
        i = i.advance();
    }
}
