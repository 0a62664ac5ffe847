//! `union-body`: the discriminant, `case` and `default` arms, and the drafts' quirks
//! (unnamed discriminant, several declarations per arm).

use nom::branch::alt;
use nom::combinator::map;
use nom::multi::{fold_many0, many1, many_till};
use nom::sequence::{delimited, pair, preceded, terminated};

use super::declarations::declaration;
use super::helpers::{
    expect, expect_punct, ident, keyword, located, lookahead, punct, unless_eof, value,
};
use super::input::{PResult, Tokens};
use super::type_spec::type_spec;
use crate::ast::*;
use crate::diag::Diagnostic;

/// `union-body: "switch" "(" declaration ")" "{" case-spec ( case-spec )* [ "default" ":"
/// declaration ";" ] "}"` (RFC 4506 section 6.3), accepting the drafts' unnamed
/// discriminant (a quirk) and, like rpcgen, the `default` arm anywhere.
pub(super) fn union_body(i: Tokens) -> PResult<UnionBody> {
    let (i, _) = expect("`switch`", keyword("switch"))(i)?;
    let (i, _) = expect_punct('(', "after `switch`")(i)?;
    let (i, disc_type) = type_spec(i)?;
    let (i, disc_name) = alt((
        map(unnamed_discriminant(&disc_type), |_| None),
        map(ident("the discriminant's name"), Some),
    ))(i)?;
    let (i, _) = expect_punct(')', "after the discriminant")(i)?;
    let (i, _) = expect_punct('{', "to open the union body")(i)?;
    let ctx = i.ctx;
    let (i, (arms, default)) = fold_many0(
        alt((
            map(case_spec, |arm| (arm, false)),
            map(default_spec, |arm| (arm, true)),
        )),
        || (Vec::new(), None),
        |(mut arms, mut default): (Vec<Arm>, Option<Arm>), (arm, is_default)| {
            if !is_default {
                arms.push(arm);
                return (arms, default);
            }
            if default.is_some() {
                ctx.push(
                    Diagnostic::error("a union has at most one `default` arm")
                        .at(&arm.loc, "second `default`"),
                );
            }
            default = Some(arm);
            (arms, default)
        },
    )(i)?;
    let (i, close) = expect("`case`, `default` or `}`", punct('}'))(i)?;
    if arms.is_empty() {
        ctx.push(
            Diagnostic::error("a union needs at least one `case` arm")
                .at(&close, "no `case` arm")
                .note("RFC 4506 section 6.3: union-body has one or more case-specs"),
        );
    }
    Ok((
        i,
        UnionBody {
            disc_type,
            disc_name,
            arms,
            default,
        },
    ))
}

/// `switch (type)` with no name (a quirk of the drafts).
pub(super) fn unnamed_discriminant<'a>(
    disc_type: &Type,
) -> impl Fn(Tokens<'a>) -> PResult<'a, ()> + '_ {
    move |i| {
        let (i, _) = lookahead(punct(')'))(i)?;
        i.ctx.push(
            i.ctx
                .quirk("the union's discriminant has no name")
                .at(&i.after_prev(), "expected a name here")
                .also(&disc_type.loc, "discriminant type")
                .help("name the discriminant, e.g. `switch (type_name disc)`"),
        );
        Ok((i, ()))
    }
}

/// `case-spec: ( "case" value ":" ) ( "case" value ":" )* declaration ";"`.
pub(super) fn case_spec(i: Tokens) -> PResult<Arm> {
    map(
        located(pair(
            many1(delimited(
                keyword("case"),
                value("a case value"),
                expect_punct(':', "after the case value"),
            )),
            arm_declarations,
        )),
        |((labels, decls), loc)| Arm { labels, decls, loc },
    )(i)
}

/// `"default" ":" declaration ";"`.
pub(super) fn default_spec(i: Tokens) -> PResult<Arm> {
    map(
        located(preceded(
            pair(keyword("default"), expect_punct(':', "after `default`")),
            arm_declarations,
        )),
        |(decls, loc)| Arm {
            labels: Vec::new(),
            decls,
            loc,
        },
    )(i)
}

/// An arm's `declaration ";"`: `void;`, one declaration, or (the drafts' quirk) several,
/// up to the next `case`, `default` or `}`.
pub(super) fn arm_declarations(i: Tokens) -> PResult<Vec<Decl>> {
    let decl = || {
        terminated(
            declaration,
            expect_punct(';', "after the arm's declaration"),
        )
    };
    let (i, decls) = alt((
        map(
            pair(keyword("void"), expect_punct(';', "after `void`")),
            |_| Vec::new(),
        ),
        map(
            pair(
                decl(),
                many_till(
                    unless_eof("`}` to close the union body", decl()),
                    lookahead(alt((keyword("case"), keyword("default"), punct('}')))),
                ),
            ),
            |(first, (rest, _))| std::iter::once(first).chain(rest).collect(),
        ),
    ))(i)?;
    if decls.len() > 1 {
        let names: Vec<&str> = decls.iter().map(|d| d.name.name.as_str()).collect();
        i.ctx.push(
            i.ctx
                .quirk(format!(
                    "union arm has {} declarations; XDR allows one per arm",
                    decls.len()
                ))
                .at(
                    &decls[1].loc.to(&decls[decls.len() - 1].loc),
                    "extra declarations",
                )
                .also(&decls[0].loc, "first declaration")
                .help(format!(
                    "define a struct holding `{}` and declare one field of that type in the arm",
                    names.join("`, `")
                ))
                .note("lenient mode treats the declarations as an anonymous struct"),
        );
    }
    Ok((i, decls))
}
