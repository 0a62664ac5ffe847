//! `program-def` (RFC 5531 section 12.2): programs, versions, procedures.

use nom::branch::alt;
use nom::combinator::map;
use nom::multi::{many_till, separated_list1};
use nom::sequence::{delimited, preceded, tuple};

use super::helpers::{expect, expect_punct, ident, keyword, punct, unless_eof, value};
use super::input::{PResult, Tokens};
use super::type_spec::type_spec;
use crate::ast::*;

/// `program-def: "program" identifier "{" version-def version-def * "}" "=" constant`
/// (the `;` is [`definition`](super::definitions::definition)'s).
pub(super) fn program_def(i: Tokens) -> PResult<Program> {
    map(
        tuple((
            preceded(keyword("program"), ident("the program's name")),
            preceded(
                expect_punct('{', "to open the program body"),
                many_till(expect("`version` or `}`", version_def), punct('}')),
            ),
            preceded(
                expect_punct('=', "after the program body"),
                value("the program number"),
            ),
        )),
        |(name, (versions, _), number)| Program {
            name,
            versions,
            number,
        },
    )(i)
}

/// `version-def: "version" identifier "{" procedure-def procedure-def * "}" "=" constant ";"`.
pub(super) fn version_def(i: Tokens) -> PResult<Version> {
    map(
        tuple((
            preceded(keyword("version"), ident("the version's name")),
            preceded(
                expect_punct('{', "to open the version body"),
                many_till(
                    unless_eof("`}` to close the version body", procedure_def),
                    punct('}'),
                ),
            ),
            delimited(
                expect_punct('=', "after the version body"),
                value("the version number"),
                expect_punct(';', "after the version number"),
            ),
        )),
        |(name, (procedures, _), number)| Version {
            name,
            procedures,
            number,
        },
    )(i)
}

/// `procedure-def: proc-return identifier "(" proc-firstarg ( "," type-specifier )* ")" "="
/// constant ";"`, where `proc-return` and `proc-firstarg` are `"void"` or a type specifier.
pub(super) fn procedure_def(i: Tokens) -> PResult<Procedure> {
    map(
        tuple((
            type_or_void,
            ident("the procedure's name"),
            delimited(
                expect_punct('(', "after the procedure's name"),
                alt((
                    map(keyword("void"), |_| Vec::new()),
                    separated_list1(punct(','), type_spec),
                )),
                expect_punct(')', "after the arguments"),
            ),
            delimited(
                expect_punct('=', "after the procedure's signature"),
                value("the procedure number"),
                expect_punct(';', "after the procedure number"),
            ),
        )),
        |(result, name, args, number)| Procedure {
            name,
            result,
            args,
            number,
        },
    )(i)
}

/// `"void"` (`None`) or a type specifier.
pub(super) fn type_or_void(i: Tokens) -> PResult<Option<Type>> {
    alt((map(keyword("void"), |_| None), map(type_spec, Some)))(i)
}
