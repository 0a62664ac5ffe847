//! `declaration`: fields, typedefs and union arms, with their array and optional forms.

use nom::branch::alt;
use nom::combinator::{map, peek};
use nom::sequence::{delimited, pair, preceded};

use super::helpers::{expect_punct, ident, keyword, maybe, punct, value};
use super::input::{PResult, Tokens};
use super::type_spec::type_spec;
use crate::ast::*;
use crate::diag::Diagnostic;

/// `declaration` (RFC 4506 section 6.3), with the annotations written before it:
///
/// ```text
///   type-specifier identifier
/// | type-specifier identifier "[" value "]"
/// | type-specifier identifier "<" [ value ] ">"
/// | "opaque" identifier "[" value "]"
/// | "opaque" identifier "<" [ value ] ">"
/// | "string" identifier "<" [ value ] ">"
/// | type-specifier "*" identifier
/// ```
///
/// plus xdrzcc's `"zcopaque"` in place of `"opaque"` (a quirk).
///
/// (`"void"` is an alternative only where a union arm or a procedure allows it.)
pub(super) fn declaration(i: Tokens) -> PResult<Decl> {
    let i = i.skip_annotations();
    let annotations = i.ctx.take_pending();
    let start = i.loc();
    let (rest, (name, kind, mark)) = alt((
        bytes_declaration(&start),
        map(typed_declaration, |(name, kind)| (name, kind, None)),
    ))(i)?;
    let mut annotations = annotations;
    annotations.extend(mark);
    Ok((
        rest,
        Decl {
            name,
            kind,
            annotations,
            loc: start.to(&rest.prev_loc()),
        },
    ))
}

/// `"[" value "]"`.
pub(super) fn fixed_length<'a>(
    what: &'static str,
    context: &'static str,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, Value> {
    delimited(punct('['), value(what), expect_punct(']', context))
}

/// `"<" [ value ] ">"`.
pub(super) fn variable_length(i: Tokens) -> PResult<Option<Value>> {
    delimited(
        punct('<'),
        alt((
            map(peek(punct('>')), |_| None),
            map(value("a maximum length"), Some),
        )),
        expect_punct('>', "after the maximum length"),
    )(i)
}

/// `"opaque" identifier "[" value "]"`, `"opaque" identifier "<" [ value ] ">"` and
/// `"string" identifier "<" [ value ] ">"` (a fixed-length string is reported and read as
/// fixed-length opaque data), and the xdrzcc dialect's `zcopaque` (a quirk: `opaque` with a
/// DDP mark, returned with the declaration).
pub(super) fn bytes_declaration<'a>(
    start: &Loc,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, (Ident, DeclKind, Option<Annotation>)> + '_ {
    move |i| {
        let (i, (is_string, zcopaque)) = alt((
            map(keyword("opaque"), |_| (false, None)),
            map(keyword("string"), |_| (true, None)),
            map(keyword(ZCOPAQUE), |loc| (false, Some(loc))),
        ))(i)?;
        let (i, name) = ident("a name")(i)?;
        let (i, kind) = alt((
            map(
                fixed_length("a length", "after the length"),
                DeclKind::FixedOpaque,
            ),
            map(variable_length, |max| {
                if is_string {
                    DeclKind::String(max)
                } else {
                    DeclKind::VarOpaque(max)
                }
            }),
            |i: Tokens<'a>| {
                let what = if is_string { "string" } else { "opaque" };
                let i = i.skip_annotations();
                Err(i.defect(
                    Diagnostic::error(format!("`{what}` needs a length"))
                        .at(&i.after_prev(), "expected `[N]` or `<N>` here")
                        .help(format!(
                            "write `{what} {}<>` for data of any length",
                            name.name
                        )),
                ))
            },
        ))(i)?;
        if is_string && matches!(kind, DeclKind::FixedOpaque(_)) {
            i.ctx.push(
                Diagnostic::error("a string cannot have a fixed length")
                    .at(&start.to(&i.prev_loc()), "fixed-length string")
                    .help(format!(
                        "use `string {}<N>` (RFC 4506 section 4.11)",
                        name.name
                    )),
            );
        }
        let mark = zcopaque.map(|keyword| zcopaque_mark(i, &keyword, &name, &kind));
        Ok((i, (name, kind, mark)))
    }
}

/// The xdrzcc (chimera) dialect's keyword for DDP-eligible opaque data.
const ZCOPAQUE: &str = "zcopaque";

/// `zcopaque` at `keyword`: reported (an error in strict mode, a warning in lenient mode)
/// and read as `opaque` with the DDP mark a `/* @ddp */` comment would give.
fn zcopaque_mark(i: Tokens, keyword: &Loc, name: &Ident, kind: &DeclKind) -> Annotation {
    let text = |v: &Value| match v {
        Value::Lit { value, .. } => value.to_string(),
        Value::Name(n) | Value::Offset { base: n, .. } => n.name.clone(),
        Value::Str { text, .. } => text.clone(),
    };
    let bounds = match kind {
        DeclKind::FixedOpaque(v) => format!("[{}]", text(v)),
        DeclKind::VarOpaque(Some(v)) => format!("<{}>", text(v)),
        _ => "<>".to_string(),
    };
    let standard = format!(
        "`/* @ddp */ opaque {}{bounds};` (the same encoding, marked DDP-eligible)",
        name.name
    );
    let help = if i.ctx.lenient {
        format!("for other XDR compilers, write {standard}")
    } else {
        format!(
            "write {standard}, or accept the xdrzcc dialect with lenient mode (`--lenient`, `Config::lenient(true)`)"
        )
    };
    i.ctx.push(
        i.ctx
            .quirk("`zcopaque` is the xdrzcc dialect's DDP-eligible opaque, not XDR")
            .at(keyword, "xdrzcc keyword")
            .help(help)
            .note("lenient mode reads it as `opaque` with a DDP mark"),
    );
    Annotation {
        name: crate::check::ddp::DDP.to_string(),
        loc: keyword.clone(),
    }
}

/// The declarations that start with a type specifier.
pub(super) fn typed_declaration(i: Tokens) -> PResult<(Ident, DeclKind)> {
    enum Shape {
        Plain,
        Fixed(Value),
        Var(Option<Value>),
        Optional,
    }
    let (i, ty) = type_spec(i)?;
    let (i, (name, shape)) = alt((
        map(preceded(punct('*'), ident("a name after `*`")), |n| {
            (n, Shape::Optional)
        }),
        pair(
            ident("a name"),
            map(
                maybe(alt((
                    map(
                        fixed_length("an array length", "after the array length"),
                        Shape::Fixed,
                    ),
                    map(variable_length, Shape::Var),
                ))),
                |s| s.unwrap_or(Shape::Plain),
            ),
        ),
    ))(i)?;
    let kind = match shape {
        Shape::Plain => DeclKind::Plain(ty),
        Shape::Fixed(v) => DeclKind::FixedArray(ty, v),
        Shape::Var(max) => DeclKind::VarArray(ty, max),
        Shape::Optional => DeclKind::Optional(ty),
    };
    Ok((i, (name, kind)))
}
