//! `const` definitions, with the drafts' typed constants and missing `=`.

use nom::branch::alt;
use nom::combinator::{cond, map};

use super::helpers::{expect_punct, ident, keyword, punct, token, value};
use super::input::{PResult, Tokens};
use super::type_spec::type_spec;
use crate::ast::*;
use crate::parse::lexer::Tok;

/// `constant-def: "const" identifier "=" constant` (RFC 4506 section 6.3; the `;` is
/// [`definition`](super::definitions::definition)'s), and the drafts' typed `const TYPE NAME = V` and `const NAME V`
/// (quirks). rpcgen also allows a string literal as the value.
pub(super) fn constant_def(i: Tokens) -> PResult<Definition> {
    let (i, _) = keyword("const")(i)?;
    // `const NAME = ...` has `=` after the name; `const TYPE NAME` has a second word.
    let typed = matches!(i.nth_significant(1), Tok::Ident(_))
        || matches!(i.skip_annotations().tok(), Tok::Ident(w) if w == "unsigned");
    let (i, ty) = cond(typed, type_spec)(i)?;
    let (i, name) = ident("the constant's name")(i)?;
    if let Some(ty) = &ty {
        i.ctx.push(
            i.ctx
                .quirk(format!(
                    "typed constant `{}`: XDR constants have no type",
                    name.name
                ))
                .at(&ty.loc.to(&name.loc), "a type is not allowed here")
                .help(format!(
                    "remove the type: `const {} = ...;` (RFC 4506 section 6.3 `constant-def`)",
                    name.name
                ))
                .note(
                    "lenient mode accepts typed constants and uses the type for the Rust constant",
                ),
        );
    }
    let (i, _) = alt((map(punct('='), |_| ()), missing_equals(&name)))(i)?;
    let (i, value) = alt((string_constant, value("the constant's value")))(i)?;
    Ok((i, Definition::Const { name, ty, value }))
}

/// No `=` between a constant's name and its value (a quirk); with no value either, the
/// failure "expected `=`".
pub(super) fn missing_equals<'a>(name: &Ident) -> impl Fn(Tokens<'a>) -> PResult<'a, ()> + '_ {
    move |i| {
        let i = i.skip_annotations();
        if !matches!(i.tok(), Tok::Number(_) | Tok::Punct('-') | Tok::Ident(_)) {
            expect_punct('=', "after the constant's name")(i)?;
        }
        i.ctx.push(
            i.ctx
                .quirk(format!(
                    "missing `=` in the definition of constant `{}`",
                    name.name
                ))
                .at(&i.after_prev(), "expected `=` here")
                .help(format!("insert `=`: `const {} = ...;`", name.name)),
        );
        Ok((i, ()))
    }
}

/// `"text"` (rpcgen's string constants).
pub(super) fn string_constant(i: Tokens) -> PResult<Value> {
    map(
        token(|t| match t {
            Tok::Str(s) => Some(s),
            _ => None,
        }),
        |(text, loc)| Value::Str {
            text: text.clone(),
            loc,
        },
    )(i)
}
