//! Tokens of the XDR language (RFC 4506 section 6.2 lexical notes), with byte spans.

use std::ops::Range;

use nom::branch::alt;
use nom::bytes::complete::{tag, take_till, take_until, take_while};
use nom::character::complete::{char, multispace1, not_line_ending, one_of, satisfy};
use nom::combinator::{map, recognize};
use nom::sequence::{pair, preceded, terminated};
use nom::IResult;

use super::marks::{self, Comment, Lookalike};

/// A token kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An unsigned integer literal (decimal, `0x` hex or leading-`0` octal).
    Number(i128),
    /// A string literal (rpcgen's string constants, `const S = "abc";`).
    Str(String),
    /// A punctuation character: `{ } ( ) [ ] < > ; : , = * -`.
    Punct(char),
    /// An annotation comment, `/* @name */` or `// @name`.
    Annotation(String),
    /// End of input.
    Eof,
}

/// A token with its byte span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The kind.
    pub tok: Tok,
    /// Byte range in the file.
    pub span: Range<usize>,
}

/// A lexical error: byte range and message.
pub type LexError = (Range<usize>, String);

/// What [`lex`] makes of a text.
#[derive(Debug, Clone, Default)]
pub struct Lexed {
    /// The tokens, ending with [`Tok::Eof`].
    pub tokens: Vec<Token>,
    /// Malformed lexemes.
    pub errors: Vec<LexError>,
    /// Comments that look like a DDP mark but are not one, with the byte range of the `@`
    /// and the word. Those whose intent is unambiguous ([`Lookalike::is_mark`]) are also in
    /// `tokens`, as the annotation `ddp`.
    pub lookalikes: Vec<(Range<usize>, Lookalike)>,
}

const PUNCT: &str = "{}()[]<>;:,=*-";

/// What one recogniser found at the current position.
enum Lexeme<'a> {
    /// Whitespace or a plain comment: nothing to emit.
    Skip,
    /// A token.
    Token(Tok),
    /// A malformed lexeme: its text is consumed and reported with `message`.
    Bad(&'a str, String),
    /// A comment that looks like a DDP mark; `at` is relative to the comment's text.
    Lookalike(Lookalike),
}

type LexResult<'a> = IResult<&'a str, Lexeme<'a>>;

/// Splits `text` into tokens; comments are dropped except annotation comments (and those
/// that look like a DDP mark, see [`marks`]).
///
/// The recognisers are nom combinators, one per lexical class; a position no recogniser
/// accepts is reported as an unexpected character and skipped, so lexing always finishes
/// and every problem in a file is reported at once.
pub fn lex(text: &str) -> Lexed {
    let mut toks = Vec::new();
    let mut errs = Vec::new();
    let mut lookalikes = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let start = text.len() - rest.len();
        match lexeme(rest) {
            Ok((after, lexeme)) => {
                let span = start..text.len() - after.len();
                match lexeme {
                    Lexeme::Skip => {}
                    Lexeme::Token(tok) => toks.push(Token { tok, span }),
                    Lexeme::Lookalike(look) => {
                        // Both comment forms open with two characters (`/*`, `//`).
                        let at = start + COMMENT_OPENER + look.at.start
                            ..start + COMMENT_OPENER + look.at.end;
                        if look.is_mark() {
                            toks.push(Token {
                                tok: Tok::Annotation(crate::check::ddp::DDP.to_string()),
                                span,
                            });
                        }
                        lookalikes.push((at, look));
                    }
                    Lexeme::Bad(what, message) => {
                        errs.push((start..start + what.len(), message));
                        if what.starts_with(|c: char| c.is_ascii_digit()) {
                            // keep the parser in step: a malformed number is still a number
                            toks.push(Token {
                                tok: Tok::Number(0),
                                span,
                            });
                        }
                    }
                }
                rest = after;
            }
            Err(_) => {
                let ch = rest.chars().next().unwrap_or('?');
                let len = ch.len_utf8();
                errs.push((start..start + len, format!("unexpected character `{ch}`")));
                rest = &rest[len..];
            }
        }
    }
    toks.push(Token {
        tok: Tok::Eof,
        span: text.len()..text.len(),
    });
    Lexed {
        tokens: toks,
        errors: errs,
        lookalikes,
    }
}

/// The length of `/*` and of `//`.
const COMMENT_OPENER: usize = 2;

fn lexeme(input: &str) -> LexResult<'_> {
    alt((
        map(multispace1, |_| Lexeme::Skip),
        block_comment,
        line_comment,
        identifier,
        number_literal,
        string_literal,
        map(one_of(PUNCT), |c| Lexeme::Token(Tok::Punct(c))),
    ))(input)
}

/// `/* ... */`, an annotation when its body is `@word`.
fn block_comment(input: &str) -> LexResult<'_> {
    let (rest, _) = tag("/*")(input)?;
    match take_until::<_, _, nom::error::Error<&str>>("*/")(rest) {
        Ok((after, body)) => Ok((&after[2..], comment_lexeme(body, true))),
        Err(_) => Ok(("", Lexeme::Bad(&input[..2], "unterminated comment".into()))),
    }
}

/// `// ...` to the end of the line, an annotation when its body is `@word`.
fn line_comment(input: &str) -> LexResult<'_> {
    map(preceded(tag("//"), not_line_ending), |body| {
        comment_lexeme(body, false)
    })(input)
}

fn comment_lexeme(body: &str, block: bool) -> Lexeme<'_> {
    match marks::classify(body, block) {
        Comment::Plain => Lexeme::Skip,
        Comment::Annotation(a) => Lexeme::Token(Tok::Annotation(a)),
        Comment::Lookalike(l) => Lexeme::Lookalike(l),
    }
}

fn identifier(input: &str) -> LexResult<'_> {
    map(
        recognize(pair(
            satisfy(|c| c.is_ascii_alphabetic() || c == '_'),
            take_while(|c: char| c.is_ascii_alphanumeric() || c == '_'),
        )),
        |id: &str| Lexeme::Token(Tok::Ident(id.to_string())),
    )(input)
}

/// A number: a digit and the alphanumerics that follow (so `0x1F`, and `12ab` is one bad
/// number rather than a number and a name).
fn number_literal(input: &str) -> LexResult<'_> {
    map(
        recognize(pair(
            satisfy(|c| c.is_ascii_digit()),
            take_while(|c: char| c.is_ascii_alphanumeric() || c == '_'),
        )),
        |digits: &str| match number(digits) {
            Some(n) => Lexeme::Token(Tok::Number(n)),
            None => Lexeme::Bad(digits, format!("invalid number `{digits}`")),
        },
    )(input)
}

/// `"text"` on one line (rpcgen string constants).
fn string_literal(input: &str) -> LexResult<'_> {
    let (rest, _) = char('"')(input)?;
    let closed: IResult<&str, &str> =
        terminated(take_till(|c| c == '"' || c == '\n'), char('"'))(rest);
    match closed {
        Ok((after, body)) => Ok((after, Lexeme::Token(Tok::Str(body.to_string())))),
        Err(_) => Ok((
            rest,
            Lexeme::Bad(&input[..1], "unterminated string literal".into()),
        )),
    }
}

/// Decimal, `0x` hexadecimal or leading-zero octal (RFC 4506 section 6.2), at most 2^64.
fn number(s: &str) -> Option<i128> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<u64>().ok()?
    };
    Some(v as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        lex(s).tokens.into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("10 0x1F 017 0"),
            vec![
                Tok::Number(10),
                Tok::Number(31),
                Tok::Number(15),
                Tok::Number(0),
                Tok::Eof
            ]
        );
        assert!(!lex("0x").errors.is_empty());
        assert!(!lex("99999999999999999999999").errors.is_empty());
    }

    #[test]
    fn comments_and_annotations() {
        assert_eq!(
            kinds("/* x */ a // y\n /* @ddp */ //@ddp\n"),
            vec![
                Tok::Ident("a".into()),
                Tok::Annotation("ddp".into()),
                Tok::Annotation("ddp".into()),
                Tok::Eof
            ]
        );
        assert!(!lex("/* open").errors.is_empty());
    }

    #[test]
    fn lookalikes_are_located_and_the_unambiguous_ones_read_as_marks() {
        let text = "a /* @DDP */ b // @dpd\n";
        let lexed = lex(text);
        assert_eq!(
            lexed
                .tokens
                .iter()
                .map(|t| t.tok.clone())
                .collect::<Vec<_>>(),
            vec![
                Tok::Ident("a".into()),
                Tok::Annotation("ddp".into()),
                Tok::Ident("b".into()),
                Tok::Eof
            ]
        );
        let at: Vec<&str> = lexed
            .lookalikes
            .iter()
            .map(|(r, _)| &text[r.clone()])
            .collect();
        assert_eq!(at, ["@DDP", "@dpd"]);
    }
}
