//! The grammar: nom combinators over the token stream, with error recovery.
//!
//! Grammar: RFC 4506 section 6.3 (`specification`, `definition`, `declaration`,
//! `type-specifier`, ...) and RFC 5531 section 12.2 (`program-def`), plus the rpcgen habit of
//! writing `struct X` / `enum X` / `union X` as a type specifier. The old RPC-over-RDMA drafts'
//! dialect (typed constants, missing `=` or `{`, several declarations per union arm, unnamed
//! discriminants) is recognised and reported as a quirk: an error in strict mode, a warning in
//! lenient mode, parsed the same way in both so checking can go on.
//!
//! # Design
//!
//! * **Input.** `Tokens` is a `Copy` cursor into the lexer's tokens (`toks`, `pos`) plus a
//!   reference to the per-file context `Ctx`, the way `nom_locate` carries its `extra`
//!   field. It implements nom's `InputLength`, which is what the repetition combinators
//!   (`many_till`, `many1`, `fold_many0`, ...) need; the parsers are plain
//!   `fn(Tokens) -> IResult<Tokens, T, PErr>` built from nom's `alt`, `preceded`,
//!   `delimited`, `pair`, `tuple`, `map`, `cond`, `not`, `peek`, `many_till`, ... and a few
//!   token-level primitives (`punct`, `keyword`, `ident`, `value`, ...).
//! * **Errors.** `nom::Err::Error(PErr::Mismatch)` means "not this alternative": it is cheap
//!   (no diagnostic is built) and lets `alt` try the next branch. A committed parser that
//!   cannot go on returns `nom::Err::Failure(PErr::Defect)`, carrying the finished
//!   diagnostic (message, labels, help, notes) and the token position where it stopped; the
//!   `expect` family turns a mismatch into such a failure, as nom's `cut` does, with the
//!   rustc-style wording ("expected `;` after the field, found `}`", fix-it "insert `;`").
//!   The grammar is LL(1) but for two two-token look-aheads (a typed constant, an enum's
//!   trailing comma): a branch that has matched its first token is committed, so nothing
//!   is parsed twice and no diagnostic is recorded by a branch that is then abandoned.
//! * **Recovery.** `recovering` wraps a committed parser: on a failure it records the
//!   diagnostic and resumes from the failure's position with a skipping parser,
//!   `recover_top` (to after the next `;` at brace depth 0, or to the next definition
//!   keyword) between definitions, `recover_in_body` (to after the next `;`, or to the
//!   closing `}`) between struct fields. So every defect of a file is reported in one run.
//! * **Non-fatal diagnostics** (quirks, warnings, the errors after which parsing goes on
//!   unchanged) are pushed into the context as they are found, so all diagnostics come out
//!   in source order.
//! * **Annotations.** `/* @ddp */` tokens are not grammar symbols: every primitive first
//!   steps over them (`Tokens::skip_annotations`), collecting each one once into the
//!   context's pending list; `declaration` takes the pending list, and `specification`
//!   warns about any left over between definitions.
//! * **Nesting.** Inline `struct {..}`, `enum {..}` and `union switch ..` type specifiers
//!   count their depth in the context and stop at [`MAX_NESTING`], which bounds the
//!   recursion; the repetitions and the recovery loops are iterative. A level of nesting
//!   costs more stack through combinators than through hand-written functions, which is
//!   what sets [`MAX_NESTING`].
//!
//! Positions follow one rule: a parser that consumed tokens returns the input just after
//! the last one; one that only looked at the next token (an absent optional part, a
//! look-ahead) returns the input after the annotations it stepped over (`maybe`,
//! `lookahead`). The end of a node's location is the token before its remaining input.

use std::cell::{Cell, RefCell};

use nom::branch::alt;
use nom::combinator::{cond, map, not, peek};
use nom::error::{ErrorKind, ParseError};
use nom::multi::{fold_many0, many0, many1, many_till, separated_list1};
use nom::sequence::{delimited, pair, preceded, terminated, tuple};
use nom::{IResult, InputLength};

use super::lexer::{Tok, Token};
use crate::ast::*;
use crate::diag::{did_you_mean, Diagnostic, Diagnostics};

/// The deepest nesting of inline type definitions accepted (bounds the parser's recursion).
///
/// A level costs the combinators 6 to 9 KB of stack in an optimised build and 27 to 39 KB in
/// an unoptimised one (build scripts are usually unoptimised), so 32 levels fit in a spawned
/// thread's default 2 MB stack in any build. Real files nest two or three levels.
pub const MAX_NESTING: usize = 32;

/// The keywords that start a definition.
const DEF_KEYWORDS: &[&str] = &["const", "typedef", "enum", "struct", "union", "program"];

const DEFINITION: &str =
    "a definition (`const`, `typedef`, `enum`, `struct`, `union` or `program`)";

/// Parses the tokens of one file (which end with [`Tok::Eof`]) into its definitions,
/// recording every problem in `diags`; never fails and never panics.
pub fn parse(
    toks: &[Token],
    file: FileId,
    lenient: bool,
    diags: &mut Diagnostics,
) -> Specification {
    let (spec, found) = parse_here(toks, file, lenient);
    diags.items.extend(found);
    spec
}

/// The definitions and the diagnostics, in order.
fn parse_here(toks: &[Token], file: FileId, lenient: bool) -> (Specification, Vec<Diagnostic>) {
    let ctx = Ctx {
        file,
        lenient,
        diags: RefCell::default(),
        pending: RefCell::default(),
        collected: Cell::new(0),
        depth: Cell::new(0),
    };
    let input = Tokens {
        toks,
        pos: 0,
        ctx: &ctx,
    };
    let spec = match specification(input) {
        Ok((_, spec)) => spec,
        // `specification` recovers from every defect; should it ever stop, the reason is
        // still reported rather than lost.
        Err(e) => {
            input.report(e, DEFINITION);
            Specification::default()
        }
    };
    (spec, ctx.diags.into_inner())
}

// ---- the input type ---------------------------------------------------------------------

/// What the parsers of one file share, reached through every [`Tokens`] (nom_locate's
/// `extra` pattern).
struct Ctx {
    file: FileId,
    lenient: bool,
    /// Diagnostics recorded so far, in order.
    diags: RefCell<Vec<Diagnostic>>,
    /// Annotations seen and not yet attached to a declaration.
    pending: RefCell<Vec<Annotation>>,
    /// Token index below which annotations have been collected (each is collected once,
    /// however often a position is looked at).
    collected: Cell<usize>,
    /// Nesting of inline type definitions.
    depth: Cell<usize>,
}

impl Ctx {
    fn loc(&self, span: &std::ops::Range<usize>) -> Loc {
        Loc {
            file: self.file,
            span: span.clone(),
        }
    }

    fn push(&self, d: Diagnostic) {
        self.diags.borrow_mut().push(d);
    }

    /// An error in strict mode, a warning in lenient mode.
    fn quirk(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::quirk(self.lenient, message)
    }

    fn take_pending(&self) -> Vec<Annotation> {
        std::mem::take(&mut self.pending.borrow_mut())
    }
}

/// The parsers' input: a position in the token stream and the shared context.
#[derive(Clone, Copy)]
struct Tokens<'a> {
    toks: &'a [Token],
    pos: usize,
    ctx: &'a Ctx,
}

impl InputLength for Tokens<'_> {
    fn input_len(&self) -> usize {
        self.toks.len().saturating_sub(self.pos)
    }
}

impl<'a> Tokens<'a> {
    /// The input after the annotation tokens at this position, which are collected into the
    /// context's pending list (once each).
    #[inline]
    fn skip_annotations(self) -> Self {
        match self.toks.get(self.pos) {
            Some(Token {
                tok: Tok::Annotation(_),
                ..
            }) => self.collect_annotations(),
            _ => self,
        }
    }

    #[inline(never)]
    fn collect_annotations(self) -> Self {
        let mut i = self;
        while let Some(Token {
            tok: Tok::Annotation(name),
            span,
        }) = i.toks.get(i.pos)
        {
            if i.pos >= i.ctx.collected.get() {
                i.ctx.pending.borrow_mut().push(Annotation {
                    name: name.clone(),
                    loc: i.ctx.loc(span),
                });
                i.ctx.collected.set(i.pos + 1);
            }
            i.pos += 1;
        }
        i
    }

    /// The token at this position ([`Tok::Eof`] past the end).
    fn tok(self) -> &'a Tok {
        self.toks.get(self.pos).map_or(&Tok::Eof, |t| &t.tok)
    }

    /// The input after this token; the final [`Tok::Eof`] is never consumed.
    fn advance(self) -> Self {
        Tokens {
            pos: if self.pos + 1 < self.toks.len() {
                self.pos + 1
            } else {
                self.pos
            },
            ..self
        }
    }

    /// The same input at another position.
    fn at(self, pos: usize) -> Self {
        Tokens { pos, ..self }
    }

    /// Where this token is.
    fn loc(self) -> Loc {
        let span = self.toks.get(self.pos).or_else(|| self.toks.last());
        self.ctx.loc(span.map_or(&(0..0), |t| &t.span))
    }

    /// The token before this position (the last one consumed or stepped over).
    fn prev(self) -> Option<&'a Token> {
        self.pos.checked_sub(1).and_then(|p| self.toks.get(p))
    }

    /// Where the token before this position is: the end of a node's location.
    fn prev_loc(self) -> Loc {
        self.ctx.loc(self.prev().map_or(&(0..0), |t| &t.span))
    }

    /// The empty location just after the previous token, where a missing token belongs.
    fn after_prev(self) -> Loc {
        let end = self.prev().map_or(0, |t| t.span.end);
        self.ctx.loc(&(end..end))
    }

    /// The `n`th token from here that is not an annotation, without collecting anything.
    fn nth_significant(self, n: usize) -> &'a Tok {
        self.toks[self.pos.min(self.toks.len())..]
            .iter()
            .filter(|t| !matches!(t.tok, Tok::Annotation(_)))
            .nth(n)
            .map_or(&Tok::Eof, |t| &t.tok)
    }

    /// A committed failure here, carrying its diagnostic.
    fn defect(self, diag: Diagnostic) -> nom::Err<PErr> {
        nom::Err::Failure(PErr::Defect {
            pos: self.pos,
            diag: Box::new(diag),
        })
    }

    /// Records the diagnostic of a failure that happened on this input (a mismatch that got
    /// this far is reported as "expected `what`"), and returns the input where it happened.
    fn report(self, e: nom::Err<PErr>, what: &'static str) -> Self {
        let e = match e {
            nom::Err::Error(PErr::Mismatch) | nom::Err::Incomplete(_) => unexpected(self, what),
            e => e,
        };
        match e {
            nom::Err::Error(PErr::Defect { pos, diag })
            | nom::Err::Failure(PErr::Defect { pos, diag }) => {
                self.ctx.push(*diag);
                self.at(pos)
            }
            _ => self,
        }
    }
}

/// The parsers' error.
#[derive(Debug)]
enum PErr {
    /// Not this alternative (in `nom::Err::Error`): nothing reported, the caller may try
    /// something else.
    Mismatch,
    /// A defect (in `nom::Err::Failure`): its diagnostic and the token position where
    /// parsing stopped, from which the enclosing recovery point resumes.
    Defect { pos: usize, diag: Box<Diagnostic> },
}

impl<'a> ParseError<Tokens<'a>> for PErr {
    fn from_error_kind(_: Tokens<'a>, _: ErrorKind) -> Self {
        PErr::Mismatch
    }

    fn append(_: Tokens<'a>, _: ErrorKind, other: Self) -> Self {
        other
    }
}

type PResult<'a, T> = IResult<Tokens<'a>, T, PErr>;

const MISMATCH: nom::Err<PErr> = nom::Err::Error(PErr::Mismatch);

// ---- token-level primitives -------------------------------------------------------------

/// The next token if `f` accepts it, with its location (nom's `satisfy`, for tokens).
fn token<'a, T>(f: impl Fn(&'a Tok) -> Option<T>) -> impl Fn(Tokens<'a>) -> PResult<'a, (T, Loc)> {
    move |i| {
        let i = i.skip_annotations();
        match f(i.tok()) {
            Some(t) => Ok((i.advance(), (t, i.loc()))),
            None => Err(MISMATCH),
        }
    }
}

/// The punctuation character `c`; its location.
fn punct<'a>(c: char) -> impl Fn(Tokens<'a>) -> PResult<'a, Loc> {
    let t = token(move |t| (*t == Tok::Punct(c)).then_some(()));
    move |i| map(&t, |(_, loc)| loc)(i)
}

/// The keyword (or other word) `w`; its location.
fn keyword<'a>(w: &'static str) -> impl Fn(Tokens<'a>) -> PResult<'a, Loc> {
    let t = token(move |t| matches!(t, Tok::Ident(s) if s == w).then_some(()));
    move |i| map(&t, |(_, loc)| loc)(i)
}

/// A keyword that starts a definition.
fn definition_keyword(i: Tokens) -> PResult<()> {
    map(
        token(|t| matches!(t, Tok::Ident(w) if DEF_KEYWORDS.contains(&w.as_str())).then_some(())),
        |_| (),
    )(i)
}

/// An unsigned integer literal.
fn number(i: Tokens) -> PResult<(i128, Loc)> {
    token(|t| match t {
        Tok::Number(n) => Some(*n),
        _ => None,
    })(i)
}

/// An identifier that is not a reserved word.
fn name(i: Tokens) -> PResult<Ident> {
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
fn end_of_file(i: Tokens) -> PResult<()> {
    map(lookahead(token(|t| (*t == Tok::Eof).then_some(()))), |_| ())(i)
}

/// `p` as a look-ahead: its result, and the input after the annotations before the next
/// token (nom's `peek`, having looked).
fn lookahead<'a, O>(
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, O> {
    move |i| {
        let i = i.skip_annotations();
        peek(&mut p)(i)
    }
}

/// An optional `p` (nom's `opt`); when absent, the input after the annotations before the
/// next token, which was looked at.
fn maybe<'a, O>(
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, Option<O>> {
    move |i| match p(i) {
        Ok((i, o)) => Ok((i, Some(o))),
        Err(nom::Err::Error(_)) => Ok((i.skip_annotations(), None)),
        Err(e) => Err(e),
    }
}

fn describe(tok: &Tok) -> String {
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
fn unexpected(i: Tokens, what: &str) -> nom::Err<PErr> {
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
fn expect<'a, O>(
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
fn expect_punct<'a>(c: char, context: &'static str) -> impl Fn(Tokens<'a>) -> PResult<'a, Loc> {
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
fn ident<'a>(what: &'static str) -> impl Fn(Tokens<'a>) -> PResult<'a, Ident> {
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
fn unless_eof<'a, O>(
    what: &'static str,
    p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, O> {
    preceded(expect(what, not(end_of_file)), p)
}

/// `p` and the location from its first token to its last.
fn located<'a, O>(
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
fn nested<'a, O>(
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

// ---- recovery ---------------------------------------------------------------------------

/// A recovery point: `p`, or, when it fails, its diagnostic recorded and `skip` run from
/// where it stopped (`None`).
fn recovering<'a, O>(
    what: &'static str,
    mut p: impl FnMut(Tokens<'a>) -> PResult<'a, O>,
    mut skip: impl FnMut(Tokens<'a>) -> PResult<'a, ()>,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, Option<O>> {
    move |i| match p(i) {
        Ok((i, o)) => Ok((i, Some(o))),
        Err(e) => {
            let (i, ()) = skip(i.report(e, what))?;
            Ok((i, None))
        }
    }
}

/// Skips the rest of a failed definition: to just after the next `;` at brace depth 0, or
/// to the next definition keyword that follows a `;` or `}` (a keyword after anything else
/// is `struct X` used as a type). A loop rather than a grammar of balanced braces, so that
/// hostile nesting cannot exhaust the stack.
fn recover_top(i: Tokens) -> PResult<()> {
    let mut depth = 0i32;
    let mut i = i;
    loop {
        i = i.skip_annotations();
        match i.tok() {
            Tok::Eof => return Ok((i, ())),
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            Tok::Punct(';') if depth <= 0 => return Ok((i.advance(), ())),
            Tok::Ident(w)
                if depth <= 0
                    && DEF_KEYWORDS.contains(&w.as_str())
                    && matches!(
                        i.prev().map(|t| &t.tok),
                        Some(Tok::Punct(';') | Tok::Punct('}'))
                    ) =>
            {
                return Ok((i, ()))
            }
            _ => {}
        }
        i = i.advance();
    }
}

/// Skips the rest of a failed field: to just after the next `;` of the body, or to its
/// closing `}` (not consumed).
fn recover_in_body(i: Tokens) -> PResult<()> {
    let mut depth = 0i32;
    let mut i = i;
    loop {
        i = i.skip_annotations();
        match i.tok() {
            Tok::Eof => return Ok((i, ())),
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') if depth == 0 => return Ok((i, ())),
            Tok::Punct('}') => depth -= 1,
            Tok::Punct(';') if depth == 0 => return Ok((i.advance(), ())),
            _ => {}
        }
        i = i.advance();
    }
}

// ---- definitions ------------------------------------------------------------------------

/// `specification: definition *` (RFC 4506 section 6.3): each definition with its location,
/// each defect reported and skipped over ([`recover_top`]); annotations found between
/// definitions are reported as ignored.
fn specification(i: Tokens) -> PResult<Specification> {
    let (i, (definitions, _)) = many_till(
        recovering(DEFINITION, located(definition), recover_top),
        preceded(stray_annotations, end_of_file),
    )(i)?;
    Ok((
        i,
        Specification {
            definitions: definitions.into_iter().flatten().collect(),
        },
    ))
}

/// Warns about the annotations collected and not attached to a declaration.
fn stray_annotations(i: Tokens) -> PResult<()> {
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
fn definition(i: Tokens) -> PResult<Definition> {
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

fn not_a_definition(i: Tokens) -> nom::Err<PErr> {
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
fn missing_semicolon_before_definition(i: Tokens) -> PResult<()> {
    let (i, ()) = lookahead(definition_keyword)(i)?;
    i.ctx.push(
        Diagnostic::error("expected `;` after the definition")
            .at(&i.after_prev(), "expected `;` here")
            .help("insert `;`"),
    );
    Ok((i, ()))
}

/// `constant-def: "const" identifier "=" constant` (RFC 4506 section 6.3; the `;` is
/// [`definition`]'s), and the drafts' typed `const TYPE NAME = V` and `const NAME V`
/// (quirks). rpcgen also allows a string literal as the value.
fn constant_def(i: Tokens) -> PResult<Definition> {
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
fn missing_equals<'a>(name: &Ident) -> impl Fn(Tokens<'a>) -> PResult<'a, ()> + '_ {
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
fn string_constant(i: Tokens) -> PResult<Value> {
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

/// `"struct" identifier struct-body` (RFC 4506 section 6.3 `type-def`).
fn struct_def(i: Tokens) -> PResult<Definition> {
    let (i, name) = preceded(keyword("struct"), ident("the struct's name"))(i)?;
    let (i, body) = struct_body(Some(&name))(i)?;
    Ok((i, Definition::Struct(name, body)))
}

/// `value: constant | identifier` (RFC 4506 section 6.3), a constant being a decimal,
/// hexadecimal or octal literal, possibly negative; "expected `what`" otherwise.
fn value<'a>(what: &'static str) -> impl FnMut(Tokens<'a>) -> PResult<'a, Value> {
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

// ---- declarations and types ---------------------------------------------------------------

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
/// (`"void"` is an alternative only where a union arm or a procedure allows it.)
fn declaration(i: Tokens) -> PResult<Decl> {
    let i = i.skip_annotations();
    let annotations = i.ctx.take_pending();
    let start = i.loc();
    let (rest, (name, kind)) = alt((bytes_declaration(&start), typed_declaration))(i)?;
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
fn fixed_length<'a>(
    what: &'static str,
    context: &'static str,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, Value> {
    delimited(punct('['), value(what), expect_punct(']', context))
}

/// `"<" [ value ] ">"`.
fn variable_length(i: Tokens) -> PResult<Option<Value>> {
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
/// fixed-length opaque data).
fn bytes_declaration<'a>(
    start: &Loc,
) -> impl FnMut(Tokens<'a>) -> PResult<'a, (Ident, DeclKind)> + '_ {
    move |i| {
        let (i, is_string) = alt((
            map(keyword("opaque"), |_| false),
            map(keyword("string"), |_| true),
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
        Ok((i, (name, kind)))
    }
}

/// The declarations that start with a type specifier.
fn typed_declaration(i: Tokens) -> PResult<(Ident, DeclKind)> {
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

/// `type-specifier` (RFC 4506 section 6.3):
///
/// ```text
///   [ "unsigned" ] "int" | [ "unsigned" ] "hyper" | "float" | "double" | "quadruple"
/// | "bool" | enum-type-spec | struct-type-spec | union-type-spec | identifier
/// ```
///
/// plus rpcgen's C spellings (`unsigned` alone, `unsigned long`/`short`/`char`) and
/// `struct X` / `enum X` / `union X` naming a type.
fn type_spec(i: Tokens) -> PResult<Type> {
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
    Ok((rest, Type { kind, loc }))
}

/// `struct-type-spec: "struct" struct-body`, and likewise for `enum` and `union` (a body
/// starts with `opener`), or rpcgen's `struct X` naming a type.
fn aggregate_type<'a>(
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

/// `enum-body: "{" ( identifier "=" value ) ( "," identifier "=" value )* "}"` (RFC 4506
/// section 6.3), plus rpcgen's members without a value and a harmless trailing comma.
fn enum_body(i: Tokens) -> PResult<EnumBody> {
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

/// `struct-body: "{" ( declaration ";" ) ( declaration ";" )* "}"` (RFC 4506 section 6.3).
/// A defective field is reported and skipped ([`recover_in_body`]); the drafts' `struct X`
/// without `{` before its first field is a quirk.
fn struct_body<'a>(name: Option<&Ident>) -> impl FnMut(Tokens<'a>) -> PResult<'a, StructBody> + '_ {
    move |i| {
        let (i, _) = alt((map(punct('{'), |_| ()), missing_open_brace(name)))(i)?;
        let (i, (fields, close)) = many_till(
            unless_eof("`}` to close the struct body", struct_field),
            punct('}'),
        )(i)?;
        let fields: Vec<Decl> = fields.into_iter().flatten().collect();
        if fields.is_empty() {
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
fn missing_open_brace<'a>(name: Option<&Ident>) -> impl Fn(Tokens<'a>) -> PResult<'a, ()> + '_ {
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
fn struct_field(i: Tokens) -> PResult<Option<Decl>> {
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

/// `union-body: "switch" "(" declaration ")" "{" case-spec ( case-spec )* [ "default" ":"
/// declaration ";" ] "}"` (RFC 4506 section 6.3), accepting the drafts' unnamed
/// discriminant (a quirk) and, like rpcgen, the `default` arm anywhere.
fn union_body(i: Tokens) -> PResult<UnionBody> {
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
fn unnamed_discriminant<'a>(disc_type: &Type) -> impl Fn(Tokens<'a>) -> PResult<'a, ()> + '_ {
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
fn case_spec(i: Tokens) -> PResult<Arm> {
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
fn default_spec(i: Tokens) -> PResult<Arm> {
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
fn arm_declarations(i: Tokens) -> PResult<Vec<Decl>> {
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

// ---- programs (RFC 5531 section 12.2) ---------------------------------------------------

/// `program-def: "program" identifier "{" version-def version-def * "}" "=" constant`
/// (the `;` is [`definition`]'s).
fn program_def(i: Tokens) -> PResult<Program> {
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
fn version_def(i: Tokens) -> PResult<Version> {
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
fn procedure_def(i: Tokens) -> PResult<Procedure> {
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
fn type_or_void(i: Tokens) -> PResult<Option<Type>> {
    alt((map(keyword("void"), |_| None), map(type_spec, Some)))(i)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::lexer::lex;

    fn parse(src: &str, lenient: bool) -> (Specification, Diagnostics) {
        let (toks, errs) = lex(src);
        assert!(errs.is_empty(), "{errs:?}");
        let mut diags = Diagnostics::default();
        let spec = super::parse(&toks, FileId(0), lenient, &mut diags);
        (spec, diags)
    }

    fn one(src: &str) -> Definition {
        let (spec, diags) = parse(src, false);
        assert!(!diags.has_errors(), "{diags:?}");
        assert_eq!(spec.definitions.len(), 1);
        spec.definitions[0].0.clone()
    }

    #[test]
    fn constants() {
        let Definition::Const { value, ty, .. } = one("const X = -0x10;") else {
            panic!()
        };
        assert!(ty.is_none());
        assert!(matches!(value, Value::Lit { value: -16, .. }));
    }

    #[test]
    fn declarations() {
        let Definition::Struct(_, body) =
            one("struct s { opaque a[4]; opaque b<>; string c<10>; int d[2]; int e<>; int *f; struct t g; };")
        else {
            panic!()
        };
        let kinds: Vec<&DeclKind> = body.fields.iter().map(|f| &f.kind).collect();
        assert!(matches!(kinds[0], DeclKind::FixedOpaque(_)));
        assert!(matches!(kinds[1], DeclKind::VarOpaque(None)));
        assert!(matches!(kinds[2], DeclKind::String(Some(_))));
        assert!(matches!(kinds[3], DeclKind::FixedArray(..)));
        assert!(matches!(kinds[4], DeclKind::VarArray(_, None)));
        assert!(matches!(kinds[5], DeclKind::Optional(_)));
        assert!(
            matches!(kinds[6], DeclKind::Plain(Type { kind: TypeKind::Named(n), .. }) if n.name == "t")
        );
    }

    #[test]
    fn unions_with_shared_arms_and_default() {
        let Definition::Union(_, u) =
            one("union u switch (int d) { case 1: case 2: int a; case 3: void; default: void; };")
        else {
            panic!()
        };
        assert_eq!(u.arms.len(), 2);
        assert_eq!(u.arms[0].labels.len(), 2);
        assert!(u.arms[1].decls.is_empty());
        assert!(u.default.is_some());
    }

    #[test]
    fn programs() {
        let Definition::Program(p) =
            one("program P { version V { void NUL(void) = 0; int ADD(int, int) = 1; } = 2; } = 0x20000000;")
        else {
            panic!()
        };
        assert_eq!(p.versions[0].procedures.len(), 2);
        assert_eq!(p.versions[0].procedures[1].args.len(), 2);
        assert!(p.versions[0].procedures[0].result.is_none());
    }

    #[test]
    fn quirks_are_errors_unless_lenient() {
        let src =
            "const uint32 X 1; struct s int a; }; union u switch (int) { case 1: int a; int b; };";
        let (strict, d) = parse(src, false);
        assert_eq!(d.error_count(), 5, "{d:?}");
        let (lenient, d) = parse(src, true);
        assert!(!d.has_errors(), "{d:?}");
        // Both modes repair the same way, so checking can go on.
        assert_eq!(strict, lenient);
        assert_eq!(lenient.definitions.len(), 3);
    }

    /// Every defect of a file in one run, in source order, at the positions the hand-written
    /// parser reported (this list was taken from it).
    #[test]
    fn diagnostics_in_order_with_positions() {
        use crate::diag::Severity::{Error, Warning};
        let src = "const uint32 A 1;\nconst B = ;\nstrcut s { int a; };\n\
            struct t int x; string s[4]; opaque o; };\n\
            union u switch (int) { case 1: int a; int b; default: void; default: void; };\n\
            enum e { X = 1, Y, };\ntypedef int z /* @ddp */;\n\
            /* @ddp */ typedef struct { } empty;\n\
            program P { version V { void F(int, ) = 1; } = 1; } = 1;\n\
            program Q { version W { void G(void) = 1; } = 1; } = 2\n\
            struct after { unsinged int x; int y };\n";
        let definition =
            "a definition (`const`, `typedef`, `enum`, `struct`, `union` or `program`)";
        let expected = [
            (
                Error,
                "typed constant `A`: XDR constants have no type".to_string(),
                6..14,
            ),
            (
                Error,
                "missing `=` in the definition of constant `A`".into(),
                14..14,
            ),
            (
                Error,
                "expected the constant's value, found `;`".into(),
                28..29,
            ),
            (
                Error,
                format!("expected {definition}, found `strcut`"),
                30..36,
            ),
            (Error, "missing `{` after `struct t`".into(), 59..59),
            (Error, "a string cannot have a fixed length".into(), 67..78),
            (Error, "`opaque` needs a length".into(), 88..88),
            (
                Error,
                "the union's discriminant has no name".into(),
                112..112,
            ),
            (
                Error,
                "union arm has 2 declarations; XDR allows one per arm".into(),
                131..136,
            ),
            (
                Error,
                "a union has at most one `default` arm".into(),
                153..167,
            ),
            (
                Warning,
                "annotation `@ddp` is not before a declaration in a struct or union arm".into(),
                207..217,
            ),
            (
                Warning,
                "annotation `@ddp` is not before a declaration in a struct or union arm".into(),
                219..229,
            ),
            (Error, "a struct needs at least one field".into(), 247..248),
            (Error, "expected a type, found `)`".into(), 292..293),
            (
                Error,
                format!("expected {definition}, found `}}`"),
                299..300,
            ),
            (
                Error,
                format!("expected {definition}, found `}}`"),
                306..307,
            ),
            (Error, "expected `;` after the definition".into(), 367..367),
            (
                Error,
                "expected a name, found keyword `int`".into(),
                392..395,
            ),
            (
                Error,
                "expected `;` after the field, found `}`".into(),
                404..404,
            ),
        ];
        let (spec, d) = parse(src, false);
        let got: Vec<_> = d
            .items
            .iter()
            .map(|d| {
                let span = d.primary.as_ref().map(|(loc, _)| loc.span.clone());
                (d.severity, d.message.clone(), span.unwrap_or(0..0))
            })
            .collect();
        assert_eq!(got, expected);
        assert_eq!(d.items[3].help, ["did you mean `struct`?"]);
        assert_eq!(d.items[17].help, ["did you mean `unsigned`?"]);
        let spans: Vec<_> = spec
            .definitions
            .iter()
            .map(|(_, l)| l.span.clone())
            .collect();
        assert_eq!(
            spans,
            [
                0..17,
                51..92,
                93..170,
                171..192,
                193..218,
                230..255,
                313..367,
                368..407
            ]
        );
    }

    #[test]
    fn nesting_is_bounded_and_the_bound_fits_an_ordinary_thread() {
        let nest = |levels: usize| {
            [
                format!(
                    "typedef {} int x; {} t;",
                    "struct { ".repeat(levels),
                    "} y; ".repeat(levels)
                ),
                format!(
                    "typedef {} int x; {} t;",
                    "union switch (int d) { case 1: ".repeat(levels),
                    "} y; ".repeat(levels)
                ),
                format!("typedef {} int d) t;", "union switch (".repeat(levels)),
            ]
        };
        // A spawned thread's default stack holds MAX_NESTING levels, even unoptimised.
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                for (levels, refused) in
                    [(MAX_NESTING, false), (MAX_NESTING + 1, true), (500, true)]
                {
                    for src in nest(levels) {
                        let (_, d) = parse(&src, false);
                        let too_deep = d
                            .items
                            .iter()
                            .any(|d| d.message.contains("nested deeper than 32"));
                        assert_eq!(too_deep, refused, "{levels} levels: {d:?}");
                    }
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn recovers_after_errors() {
        let (spec, d) = parse(
            "struct a { int ; }; struct b { int x; }; garbage here; enum e { A = 1 };",
            false,
        );
        assert!(d.error_count() >= 2);
        let names: Vec<String> = spec
            .definitions
            .iter()
            .filter_map(|(def, _)| match def {
                Definition::Struct(n, _) | Definition::Enum(n, _) => Some(n.name.clone()),
                _ => None,
            })
            .collect();
        assert!(
            names.contains(&"b".to_string()) && names.contains(&"e".to_string()),
            "{names:?}"
        );
    }
}
