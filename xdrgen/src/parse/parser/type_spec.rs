//! `type-specifier`: built-in types, names and inline `struct`/`enum`/`union` bodies.

use nom::branch::alt;
use nom::combinator::map;
use nom::sequence::preceded;

use super::enums::enum_body;
use super::helpers::{expect, ident, keyword, lookahead, maybe, name, nested, punct};
use super::input::{PResult, Tokens};
use super::structs::struct_body;
use super::unions::union_body;
use crate::ast::*;
use crate::parse::lexer::Tok;

/// `type-specifier` (RFC 4506 section 6.3):
///
/// ```text
///   [ "unsigned" ] "int" | [ "unsigned" ] "hyper" | "float" | "double" | "quadruple"
/// | "bool" | enum-type-spec | struct-type-spec | union-type-spec | identifier
/// ```
///
/// plus rpcgen's C spellings (`unsigned` alone, `unsigned long`/`short`/`char`) and
/// `struct X` / `enum X` / `union X` naming a type.
pub(super) fn type_spec(i: Tokens) -> PResult<Type> {
    let i = i.skip_annotations();
    let start = i.loc();
    let (rest, kind) = expect(
        "a type",
        alt((
            // first, as the most frequent; disjoint from the others, which are reserved words
            map(name, TypeKind::Named),
            map(
                preceded(
                    keyword("unsigned"),
                    maybe(alt((
                        map(
                            alt((
                                keyword("int"),
                                keyword("long"),
                                keyword("short"),
                                keyword("char"),
                            )),
                            |_| TypeKind::UInt,
                        ),
                        map(keyword("hyper"), |_| TypeKind::UHyper),
                    ))),
                ),
                |k| k.unwrap_or(TypeKind::UInt),
            ),
            map(keyword("int"), |_| TypeKind::Int),
            map(keyword("hyper"), |_| TypeKind::Hyper),
            map(keyword("float"), |_| TypeKind::Float),
            map(keyword("double"), |_| TypeKind::Double),
            map(keyword("quadruple"), |_| TypeKind::Quadruple),
            map(keyword("bool"), |_| TypeKind::Bool),
            aggregate_type(
                &start,
                "struct",
                map(punct('{'), |_| ()),
                map(struct_body(None), TypeKind::Struct),
            ),
            aggregate_type(
                &start,
                "enum",
                map(punct('{'), |_| ()),
                map(enum_body, TypeKind::Enum),
            ),
            aggregate_type(
                &start,
                "union",
                alt((map(punct('{'), |_| ()), map(keyword("switch"), |_| ()))),
                map(union_body, |b| TypeKind::Union(Box::new(b))),
            ),
        )),
    )(i)?;
    let loc = start.to(&rest.prev_loc());
    // `struct X` naming a type (not a body): remember the keyword.
    let tag = match (i.tok(), &kind) {
        (Tok::Ident(w), TypeKind::Named(_)) => match w.as_str() {
            "struct" => Some(Tag::Struct),
            "union" => Some(Tag::Union),
            "enum" => Some(Tag::Enum),
            _ => None,
        },
        _ => None,
    };
    Ok((rest, Type { kind, loc, tag }))
}

/// `struct-type-spec: "struct" struct-body`, and likewise for `enum` and `union` (a body
/// starts with `opener`), or rpcgen's `struct X` naming a type.
pub(super) fn aggregate_type<'a>(
    start: &Loc,
    word: &'static str,
    opener: impl FnMut(Tokens<'a>) -> PResult<'a, ()>,
    body: impl FnMut(Tokens<'a>) -> PResult<'a, TypeKind>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, TypeKind> {
    let what = match word {
        "struct" => "a struct name",
        "enum" => "a enum name",
        _ => "a union name",
    };
    preceded(
        keyword(word),
        alt((
            preceded(lookahead(opener), nested(start.clone(), body)),
            map(ident(what), TypeKind::Named),
        )),
    )
}
