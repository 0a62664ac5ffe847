//! `enum-body`.

use nom::combinator::{map, not};
use nom::multi::many0;
use nom::sequence::{delimited, pair, preceded, terminated};

use super::helpers::{expect_punct, ident, maybe, punct, value};
use super::input::{PResult, Tokens};
use crate::ast::*;

/// `enum-body: "{" ( identifier "=" value ) ( "," identifier "=" value )* "}"` (RFC 4506
/// section 6.3), plus rpcgen's members without a value and a harmless trailing comma.
pub(super) fn enum_body(i: Tokens) -> PResult<EnumBody> {
    let member = || {
        map(
            pair(
                ident("an enum member name"),
                maybe(preceded(punct('='), value("the enum member's value"))),
            ),
            |(name, value)| EnumMember { name, value },
        )
    };
    map(
        delimited(
            expect_punct('{', "to open the enum body"),
            terminated(
                pair(
                    member(),
                    many0(preceded(pair(punct(','), not(punct('}'))), member())),
                ),
                maybe(punct(',')),
            ),
            expect_punct('}', "to close the enum body"),
        ),
        |(first, rest)| EnumBody {
            members: std::iter::once(first).chain(rest).collect(),
        },
    )(i)
}
