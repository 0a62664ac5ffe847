//! The parsers' input: a cursor into the tokens with the file's shared context, and the
//! parsers' error type.

use std::cell::{Cell, RefCell};

use nom::error::{ErrorKind, ParseError};
use nom::{IResult, InputLength};

use super::helpers::unexpected;
use crate::ast::*;
use crate::diag::Diagnostic;
use crate::parse::lexer::{Tok, Token};

/// What the parsers of one file share, reached through every [`Tokens`] (nom_locate's
/// `extra` pattern).
pub(super) struct Ctx {
    pub(super) file: FileId,
    pub(super) lenient: bool,
    /// Diagnostics recorded so far, in order.
    pub(super) diags: RefCell<Vec<Diagnostic>>,
    /// Annotations seen and not yet attached to a declaration.
    pub(super) pending: RefCell<Vec<Annotation>>,
    /// Token index below which annotations have been collected (each is collected once,
    /// however often a position is looked at).
    pub(super) collected: Cell<usize>,
    /// Nesting of inline type definitions.
    pub(super) depth: Cell<usize>,
}

impl Ctx {
    pub(super) fn loc(&self, span: &std::ops::Range<usize>) -> Loc {
        Loc {
            file: self.file,
            span: span.clone(),
        }
    }

    pub(super) fn push(&self, d: Diagnostic) {
        self.diags.borrow_mut().push(d);
    }

    /// An error in strict mode, a warning in lenient mode.
    pub(super) fn quirk(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::quirk(self.lenient, message)
    }

    pub(super) fn take_pending(&self) -> Vec<Annotation> {
        std::mem::take(&mut self.pending.borrow_mut())
    }
}

/// The parsers' input: a position in the token stream and the shared context.
#[derive(Clone, Copy)]
pub(super) struct Tokens<'a> {
    pub(super) toks: &'a [Token],
    pub(super) pos: usize,
    pub(super) ctx: &'a Ctx,
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
    pub(super) fn skip_annotations(self) -> Self {
        match self.toks.get(self.pos) {
            Some(Token {
                tok: Tok::Annotation(_),
                ..
            }) => self.collect_annotations(),
            _ => self,
        }
    }

    #[inline(never)]
    pub(super) fn collect_annotations(self) -> Self {
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
    pub(super) fn tok(self) -> &'a Tok {
        self.toks.get(self.pos).map_or(&Tok::Eof, |t| &t.tok)
    }

    /// The input after this token; the final [`Tok::Eof`] is never consumed.
    pub(super) fn advance(self) -> Self {
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
    pub(super) fn at(self, pos: usize) -> Self {
        Tokens { pos, ..self }
    }

    /// Where this token is.
    pub(super) fn loc(self) -> Loc {
        let span = self.toks.get(self.pos).or_else(|| self.toks.last());
        self.ctx.loc(span.map_or(&(0..0), |t| &t.span))
    }

    /// The token before this position (the last one consumed or stepped over).
    pub(super) fn prev(self) -> Option<&'a Token> {
        self.pos.checked_sub(1).and_then(|p| self.toks.get(p))
    }

    /// Where the token before this position is: the end of a node's location.
    pub(super) fn prev_loc(self) -> Loc {
        self.ctx.loc(self.prev().map_or(&(0..0), |t| &t.span))
    }

    /// The empty location just after the previous token, where a missing token belongs.
    pub(super) fn after_prev(self) -> Loc {
        let end = self.prev().map_or(0, |t| t.span.end);
        self.ctx.loc(&(end..end))
    }

    /// The `n`th token from here that is not an annotation, without collecting anything.
    pub(super) fn nth_significant(self, n: usize) -> &'a Tok {
        self.toks[self.pos.min(self.toks.len())..]
            .iter()
            .filter(|t| !matches!(t.tok, Tok::Annotation(_)))
            .nth(n)
            .map_or(&Tok::Eof, |t| &t.tok)
    }

    /// A committed failure here, carrying its diagnostic.
    pub(super) fn defect(self, diag: Diagnostic) -> nom::Err<PErr> {
        nom::Err::Failure(PErr::Defect {
            pos: self.pos,
            diag: Box::new(diag),
        })
    }

    /// Records the diagnostic of a failure that happened on this input (a mismatch that got
    /// this far is reported as "expected `what`"), and returns the input where it happened.
    pub(super) fn report(self, e: nom::Err<PErr>, what: &'static str) -> Self {
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
pub(super) enum PErr {
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

pub(super) type PResult<'a, T> = IResult<Tokens<'a>, T, PErr>;

pub(super) const MISMATCH: nom::Err<PErr> = nom::Err::Error(PErr::Mismatch);
