//! Shared token-level parsers: punctuation, keywords, names, values, the `expect` family
//! that turns a mismatch into a diagnostic, look-ahead, locations and the nesting bound.

use nom::branch::alt;
use nom::combinator::{map, not, peek};
use nom::sequence::{pair, preceded};

use super::input::{PErr, PResult, Tokens, MISMATCH};
use super::{DEF_KEYWORDS, MAX_NESTING};
use crate::ast::*;
use crate::diag::{did_you_mean, Diagnostic};
use crate::parse::lexer::{Tok, Token};

/// The next token if `f` accepts it, with its location (nom's `satisfy`, for tokens).
pub(super) fn token<'a, T>(
    f: impl Fn(&'a Tok) -> Option<T>,
) -> impl Fn(Tokens<'a>) -> PResult<'a, (T, Loc)> {
    move |i| {
        let i = i.skip_annotations();
        match f(i.tok()) {
            Some(t) => Ok((i.advance(), (t, i.loc()))),
            None => Err(MISMATCH),
        }
    }
}

/// The punctuation character `c`; its location.
pub(super) fn punct<'a>(c: char) -> impl Fn(Tokens<'a>) -> PResult<'a, Loc> {
    let t = token(move |t| (*t == Tok::Punct(c)).then_some(()));
    move |i| map(&t, |(_, loc)| loc)(i)
}

/// The keyword (or other word) `w`; its location.
pub(super) fn keyword<'a>(w: &'static str) -> impl Fn(Tokens<'a>) -> PResult<'a, Loc> {
    let t = token(move |t| matches!(t, Tok::Ident(s) if s == w).then_some(()));
    move |i| map(&t, |(_, loc)| loc)(i)
}

/// A keyword that starts a definition.
pub(super) fn definition_keyword(i: Tokens) -> PResult<()> {
    map(
        token(|t| matches!(t, Tok::Ident(w) if DEF_KEYWORDS.contains(&w.as_str())).then_some(())),
        |_| (),
    )(i)
}

/// An unsigned integer literal.
pub(super) fn number(i: Tokens) -> PResult<(i128, Loc)> {
    token(|t| match t {
        Tok::Number(n) => Some(*n),
        _ => None,
    })(i)
}

/// An identifier that is not a reserved word.
pub(super) fn name(i: Tokens) -> PResult<Ident> {
    map(
        token(|t| match t {
            Tok::Ident(s) if !is_reserved(s) => Some(s),
            _ => None,
        }),
        |(s, loc)| Ident {
            name: s.clone(),
            loc,
        },
    )(i)
}

/// The end of the input (not consumed).
pub(super) fn end_of_file(i: Tokens) -> PResult<()> {
    map(lookahead(token(|t| (*t == Tok::Eof).then_some(()))), |_| ())(i)
}

/// `p` as a look-ahead: its result, and the input after the annotations before the next
/// token (nom's `peek`, having looked).
pub(super) fn lookahead<'a, O>(
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, O> {
    move |i| {
        let i = i.skip_annotations();
        peek(&mut p)(i)
    }
}

/// An optional `p` (nom's `opt`); when absent, the input after the annotations before the
/// next token, which was looked at.
pub(super) fn maybe<'a, O>(
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, Option<O>> {
    move |i| match p(i) {
        Ok((i, o)) => Ok((i, Some(o))),
        Err(nom::Err::Error(_)) => Ok((i.skip_annotations(), None)),
        Err(e) => Err(e),
    }
}

pub(super) fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Number(n) => format!("`{n}`"),
        Tok::Punct(c) => format!("`{c}`"),
        Tok::Annotation(a) => format!("annotation `@{a}`"),
        Tok::Str(_) => "a string literal".into(),
        Tok::Eof => "end of file".into(),
    }
}

/// The failure "expected `what`, found ..." at the next token.
pub(super) fn unexpected(i: Tokens, what: &str) -> nom::Err<PErr> {
    let i = i.skip_annotations();
    let found = describe(i.tok());
    let loc = i.loc();
    i.defect(
        Diagnostic::error(format!("expected {what}, found {found}"))
            .at(&loc, format!("expected {what}")),
    )
}

/// `p`, committed: a mismatch becomes the failure "expected `what`" (nom's `cut`, with a
/// diagnostic).
pub(super) fn expect<'a, O>(
    what: &'static str,
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, O> {
    move |i| match p(i) {
        Err(nom::Err::Error(PErr::Mismatch)) => Err(unexpected(i, what)),
        Err(nom::Err::Error(d)) => Err(nom::Err::Failure(d)),
        r => r,
    }
}

/// The punctuation `c`, required `context` (e.g. "after the field"): when missing, a
/// failure pointing just after the previous token, with the fix-it "insert `c`".
pub(super) fn expect_punct<'a>(
    c: char,
    context: &'static str,
) -> impl Fn(Tokens<'a>) -> PResult<'a, Loc> {
    let p = punct(c);
    move |i| {
        p(i).map_err(|_| {
            let i = i.skip_annotations();
            i.defect(
                Diagnostic::error(format!(
                    "expected `{c}` {context}, found {}",
                    describe(i.tok())
                ))
                .at(&i.after_prev(), format!("expected `{c}` here"))
                .also(&i.loc(), "unexpected token")
                .help(format!("insert `{c}`")),
            )
        })
    }
}

/// A name (RFC 4506 `identifier`), required: the failure "expected `what`", or, for a
/// reserved word, "a keyword cannot be a name" (with a did-you-mean when the word before
/// looks like a misspelled keyword: `unsinged int x;`).
pub(super) fn ident<'a>(what: &'static str) -> impl Fn(Tokens<'a>) -> PResult<'a, Ident> {
    move |i| {
        name(i).map_err(|_| {
            let i = i.skip_annotations();
            let Tok::Ident(word) = i.tok() else {
                return unexpected(i, what);
            };
            let mut d = Diagnostic::error(format!("expected {what}, found keyword `{word}`"))
                .at(&i.loc(), "a keyword cannot be a name")
                .note("RFC 4506 section 6.4 lists the reserved words");
            if let Some(Token {
                tok: Tok::Ident(prev),
                span,
            }) = i.prev()
            {
                let words = ["unsigned", "struct", "enum", "union", "opaque", "string"];
                if let Some(k) = did_you_mean(prev, words.into_iter()) {
                    d = d
                        .also(&i.ctx.loc(span), "read as a type name")
                        .help(format!("did you mean `{k}`?"));
                }
            }
            i.defect(d)
        })
    }
}

/// `p` unless the input is at its end, where it fails with "expected `what`".
pub(super) fn unless_eof<'a, O>(
    what: &'static str,
    p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, O> {
    preceded(expect(what, not(end_of_file)), p)
}

/// `p` and the location from its first token to its last.
pub(super) fn located<'a, O>(
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, (O, Loc)> {
    move |i| {
        let i = i.skip_annotations();
        let start = i.loc();
        let (rest, o) = p(i)?;
        Ok((rest, (o, start.to(&rest.prev_loc()))))
    }
}

/// `p` one level deeper in inline type definitions; beyond [`MAX_NESTING`] levels, a
/// failure pointing at `start` (this bounds the recursion).
pub(super) fn nested<'a, O>(
    start: Loc,
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, O> {
    move |i| {
        let depth = &i.ctx.depth;
        if depth.get() >= MAX_NESTING {
            return Err(i.defect(
                Diagnostic::error(format!(
                    "inline type definitions nested deeper than {MAX_NESTING}"
                ))
                .at(&start, "too deep")
                .help("define the inner types separately and refer to them by name"),
            ));
        }
        depth.set(depth.get() + 1);
        let r = p(i);
        depth.set(depth.get() - 1);
        r
    }
}

/// `value: constant | identifier` (RFC 4506 section 6.3), a constant being a decimal,
/// hexadecimal or octal literal, possibly negative; "expected `what`" otherwise.
pub(super) fn value<'a>(what: &'static str) -> impl FnMut(Tokens<'a>) -> PResult<'a, Value> {
    expect(
        what,
        alt((
            map(number, |(value, loc)| Value::Lit { value, loc }),
            map(
                pair(punct('-'), expect("a number after `-`", number)),
                |(minus, (n, end))| Value::Lit {
                    value: -n,
                    loc: minus.to(&end),
                },
            ),
            map(name, Value::Name),
        )),
    )
}

/// Keywords of RFC 4506 section 6.4 and RFC 5531 that cannot be names.
pub fn is_reserved(w: &str) -> bool {
    matches!(
        w,
        "bool"
            | "case"
            | "const"
            | "default"
            | "double"
            | "quadruple"
            | "enum"
            | "float"
            | "hyper"
            | "int"
            | "opaque"
            | "string"
            | "struct"
            | "switch"
            | "typedef"
            | "union"
            | "unsigned"
            | "void"
            | "program"
            | "version"
    )
}
