//! `specification` and `definition`: the top level of a file.

use nom::branch::alt;
use nom::combinator::map;
use nom::multi::many_till;
use nom::sequence::{pair, preceded};

use super::constants::constant_def;
use super::declarations::declaration;
use super::enums::enum_body;
use super::helpers::{
    definition_keyword, end_of_file, expect_punct, ident, keyword, lookahead, unexpected,
};
use super::input::{PErr, PResult, Tokens};
use super::namespaces::definition_or_namespace;
use super::program::program_def;
use super::recovery::{recover_top, recovering};
use super::structs::struct_def;
use super::unions::union_body;
use super::{DEFINITION, DEF_KEYWORDS};
use crate::ast::*;
use crate::diag::{did_you_mean, Diagnostic};
use crate::parse::lexer::Tok;

/// `specification: definition *` (RFC 4506 section 6.3), definitions inside xdrpp
/// `namespace` blocks included (flattened): each definition with its location,
/// each defect reported and skipped over ([`recover_top`]); annotations found between
/// definitions are reported as ignored.
pub(super) fn specification(i: Tokens) -> PResult<Specification> {
    let (i, (definitions, _)) = many_till(
        recovering(DEFINITION, definition_or_namespace, recover_top),
        preceded(stray_annotations, end_of_file),
    )(i)?;
    Ok((
        i,
        Specification {
            definitions: definitions.into_iter().flatten().flatten().collect(),
        },
    ))
}

/// Warns about the annotations collected and not attached to a declaration.
pub(super) fn stray_annotations(i: Tokens) -> PResult<()> {
    let i = i.skip_annotations();
    for a in i.ctx.take_pending() {
        i.ctx.push(
            Diagnostic::warning(format!(
                "annotation `@{}` is not before a declaration in a struct or union arm",
                a.name
            ))
            .at(&a.loc, "ignored")
            .help("place it on the line before the field it marks"),
        );
    }
    Ok((i, ()))
}

/// `definition: type-def | constant-def` (RFC 4506 section 6.3), or `program-def` (RFC 5531
/// section 12.2), then `;`. A `;` forgotten before the next definition is reported and the
/// definition kept; anything else than a definition keyword fails with a did-you-mean.
pub(super) fn definition(i: Tokens) -> PResult<Definition> {
    let (rest, def) = alt((
        constant_def,
        map(
            preceded(keyword("typedef"), declaration),
            Definition::Typedef,
        ),
        map(
            preceded(keyword("enum"), pair(ident("the enum's name"), enum_body)),
            |(name, body)| Definition::Enum(name, body),
        ),
        struct_def,
        map(
            preceded(
                keyword("union"),
                pair(ident("the union's name"), union_body),
            ),
            |(name, body)| Definition::Union(name, body),
        ),
        map(program_def, Definition::Program),
    ))(i)
    .map_err(|e| match e {
        nom::Err::Error(_) => not_a_definition(i),
        e => e,
    })?;
    let (rest, ()) = alt((
        missing_semicolon_before_definition,
        map(expect_punct(';', "after the definition"), |_| ()),
    ))(rest)?;
    Ok((rest, def))
}

pub(super) fn not_a_definition(i: Tokens) -> nom::Err<PErr> {
    let mut e = unexpected(i, DEFINITION);
    if let (Tok::Ident(word), nom::Err::Failure(PErr::Defect { diag, .. })) =
        (i.skip_annotations().tok(), &mut e)
    {
        if let Some(k) = did_you_mean(word, DEF_KEYWORDS.iter().copied()) {
            diag.help.push(format!("did you mean `{k}`?"));
        }
    }
    e
}

/// The next definition's keyword where the `;` ending this one belongs: an error, but
/// both definitions are kept.
pub(super) fn missing_semicolon_before_definition(i: Tokens) -> PResult<()> {
    let (i, ()) = lookahead(definition_keyword)(i)?;
    i.ctx.push(
        Diagnostic::error("expected `;` after the definition")
            .at(&i.after_prev(), "expected `;` here")
            .help("insert `;`"),
    );
    Ok((i, ()))
}
