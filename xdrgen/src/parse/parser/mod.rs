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
//! # Modules
//!
//! One module per construct: `definitions` (a file's top level), `namespaces` (xdrpp's
//! `namespace` blocks), `constants` (`const`), `declarations`, `type_spec`, `structs`,
//! `enums`, `unions`, `program` (RFC 5531 programs and versions); shared machinery in
//! `input` (the input and error types), `helpers` (token-level parsers, the `expect`
//! family, values) and `recovery`.
//!
//! Positions follow one rule: a parser that consumed tokens returns the input just after
//! the last one; one that only looked at the next token (an absent optional part, a
//! look-ahead) returns the input after the annotations it stepped over (`maybe`,
//! `lookahead`). The end of a node's location is the token before its remaining input.

mod constants;
mod declarations;
mod definitions;
mod enums;
mod helpers;
mod input;
mod namespaces;
mod program;
mod recovery;
mod structs;
#[cfg(test)]
mod tests;
mod type_spec;
mod unions;

use std::cell::{Cell, RefCell};

use super::lexer::Token;
use crate::ast::*;
use crate::diag::{Diagnostic, Diagnostics};
use definitions::specification;
pub use helpers::is_reserved;
use input::{Ctx, Tokens};

/// The deepest nesting of inline type definitions accepted (bounds the parser's recursion).
///
/// A level costs the combinators 6 to 9 KB of stack in an optimised build and 27 to 39 KB in
/// an unoptimised one (build scripts are usually unoptimised), so 32 levels fit in a spawned
/// thread's default 2 MB stack in any build. Real files nest two or three levels.
pub const MAX_NESTING: usize = 32;

/// The keywords that start a definition.
const DEF_KEYWORDS: &[&str] = &[
    "const",
    "typedef",
    "enum",
    "struct",
    "union",
    "program",
    "namespace",
];

/// What a file is made of, for "expected ..." diagnostics.
const DEFINITION: &str =
    "a definition (`const`, `typedef`, `enum`, `struct`, `union` or `program`)";

/// Parses the tokens of one file (which end with [`Tok::Eof`](super::lexer::Tok::Eof)) into its definitions,
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
