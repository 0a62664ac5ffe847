//! `namespace NAME { definitions }`, the xdrpp dialect Stellar's `.x` files use: an
//! extension of RFC 4506 accepted in both modes. XDR names are never qualified, so the
//! definitions are flattened into the inputs' one namespace (and one Rust module), with a
//! note; nested namespaces likewise.

use super::definitions::definition;
use super::helpers::{end_of_file, expect_punct, ident, keyword, located, maybe, punct};
use super::input::{PResult, Tokens};
use super::recovery::{recover_in_namespace, recovering};
use super::{DEFINITION, MAX_NESTING};
use crate::ast::*;
use crate::diag::{Diagnostic, Severity};

/// One element of a file or of a namespace body: a definition with its location, or the
/// definitions of a namespace block.
pub(super) fn definition_or_namespace(i: Tokens) -> PResult<Vec<(Definition, Loc)>> {
    match namespace_block(i) {
        Err(nom::Err::Error(_)) => {
            let (i, def) = located(definition)(i)?;
            Ok((i, vec![def]))
        }
        r => r,
    }
}

/// `"namespace" identifier "{" ( definition | namespace )* "}" [ ";" ]`: the definitions
/// inside, each defect reported and skipped ([`recover_in_namespace`]); a body left open at
/// the end of the file is reported and its definitions kept.
fn namespace_block(i: Tokens) -> PResult<Vec<(Definition, Loc)>> {
    let (i, start) = keyword("namespace")(i)?;
    let (i, name) = ident("the namespace's name")(i)?;
    let (i, _) = expect_punct('{', "to open the namespace body")(i)?;
    i.ctx.push(
        Diagnostic::new(
            Severity::Note,
            format!(
                "namespace `{}`: its definitions join the inputs' one namespace",
                name.name
            ),
        )
        .at(&start.to(&name.loc), "flattened")
        .note("XDR names are not qualified; two definitions of one name in different namespaces conflict"),
    );
    // Shares the bound of inline type definitions: both recurse through the parser.
    let depth = &i.ctx.depth;
    if depth.get() >= MAX_NESTING {
        return Err(i.defect(
            Diagnostic::error(format!("namespaces nested deeper than {MAX_NESTING}"))
                .at(&start.to(&name.loc), "too deep")
                .help("XDR names are not qualified: the inner namespaces can be removed"),
        ));
    }
    depth.set(depth.get() + 1);
    let body = namespace_body(i, &name);
    depth.set(depth.get() - 1);
    let (i, defs) = body?;
    let (i, _) = maybe(punct(';'))(i)?;
    Ok((i, defs))
}

/// The definitions up to and including the namespace's closing `}`.
fn namespace_body<'a>(mut i: Tokens<'a>, name: &Ident) -> PResult<'a, Vec<(Definition, Loc)>> {
    let mut defs = Vec::new();
    loop {
        if let Ok((rest, _)) = punct('}')(i) {
            return Ok((rest, defs));
        }
        if let Ok((rest, ())) = end_of_file(i) {
            rest.ctx.push(
                Diagnostic::error(format!(
                    "expected `}}` to close namespace `{}`, found end of file",
                    name.name
                ))
                .at(&rest.after_prev(), "expected `}` here")
                .also(&name.loc, "this namespace is not closed")
                .help("insert `}` after its last definition"),
            );
            return Ok((rest, defs));
        }
        let (rest, found) =
            recovering(DEFINITION, definition_or_namespace, recover_in_namespace)(i)?;
        defs.extend(found.into_iter().flatten());
        // A recovery that stopped where it started (at a token it stops at) must not
        // loop: step over that token.
        i = if rest.pos == i.pos {
            rest.advance()
        } else {
            rest
        };
    }
}
