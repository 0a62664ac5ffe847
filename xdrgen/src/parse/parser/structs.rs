//! `struct` definitions and `struct-body`, with the drafts' missing `{`.

use nom::branch::alt;
use nom::combinator::map;
use nom::multi::many_till;
use nom::sequence::preceded;

use super::declarations::declaration;
use super::helpers::{expect_punct, ident, keyword, punct, unexpected, unless_eof};
use super::input::{PResult, Tokens};
use super::recovery::{recover_in_body, recovering};
use crate::ast::*;
use crate::diag::Diagnostic;
use crate::parse::lexer::Tok;

/// `"struct" identifier struct-body` (RFC 4506 section 6.3 `type-def`).
pub(super) fn struct_def(i: Tokens) -> PResult<Definition> {
    let (i, name) = preceded(keyword("struct"), ident("the struct's name"))(i)?;
    let (i, body) = struct_body(Some(&name))(i)?;
    Ok((i, Definition::Struct(name, body)))
}

/// `struct-body: "{" ( declaration ";" ) ( declaration ";" )* "}"` (RFC 4506 section 6.3).
/// A defective field is reported and skipped ([`recover_in_body`]); the drafts' `struct X`
/// without `{` before its first field is a quirk.
pub(super) fn struct_body<'a>(
    name: Option<&Ident>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, StructBody> + '_ {
    move |i| {
        let (i, _) = alt((map(punct('{'), |_| ()), missing_open_brace(name)))(i)?;
        let (i, (fields, close)) = many_till(
            unless_eof("`}` to close the struct body", struct_field),
            punct('}'),
        )(i)?;
        // A field that failed was reported already: an empty body then follows from that
        // error and is not reported again.
        let any_failed = fields.iter().any(Option::is_none);
        let fields: Vec<Decl> = fields.into_iter().flatten().collect();
        if fields.is_empty() && !any_failed {
            i.ctx.push(
                Diagnostic::error("a struct needs at least one field")
                    .at(&close, "empty struct body")
                    .note("RFC 4506 section 6.3: struct-body has one or more declarations"),
            );
        }
        Ok((i, StructBody { fields }))
    }
}

/// The v2 draft's `struct rpcrdma2_hdr_prefix` with no `{` before its first field (a quirk,
/// section 6.3 of that draft); otherwise the failure "expected `{`".
pub(super) fn missing_open_brace<'a>(
    name: Option<&Ident>,
) -> impl Fn(Tokens<'a>) -> PResult<'a, ()> + '_ {
    move |i| {
        let i = i.skip_annotations();
        let starts_decl = matches!(i.tok(), Tok::Ident(w) if w != "const" && w != "typedef");
        match name {
            Some(n) if starts_decl => {
                i.ctx.push(
                    i.ctx
                        .quirk(format!("missing `{{` after `struct {}`", n.name))
                        .at(&i.after_prev(), "expected `{` here")
                        .also(&n.loc, "in this struct")
                        .help(format!("insert `{{`: `struct {} {{`", n.name)),
                );
                Ok((i, ()))
            }
            _ => Err(unexpected(i, "`{` to open the struct body")),
        }
    }
}

/// `declaration ";"` in a struct body: a defective declaration is reported and skipped;
/// after a good one, a missing `;` is reported and skipped, the field kept.
pub(super) fn struct_field(i: Tokens) -> PResult<Option<Decl>> {
    let (i, decl) = recovering("a declaration", declaration, recover_in_body)(i)?;
    match decl {
        Some(d) => {
            let (i, _) =
                recovering("`;`", expect_punct(';', "after the field"), recover_in_body)(i)?;
            Ok((i, Some(d)))
        }
        None => Ok((i, None)),
    }
}
