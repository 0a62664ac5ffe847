//! Tokens of the XDR language (RFC 4506 section 6.2 lexical notes), with byte spans.

use std::ops::Range;

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

const PUNCT: &[u8] = b"{}()[]<>;:,=*-";

/// Splits `text` into tokens; comments are dropped except annotation comments.
pub fn lex(text: &str) -> (Vec<Token>, Vec<LexError>) {
    let b = text.as_bytes();
    let mut toks = Vec::new();
    let mut errs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i;
            match text[i + 2..].find("*/") {
                Some(end) => {
                    let body = &text[i + 2..i + 2 + end];
                    i += 2 + end + 2;
                    if let Some(a) = annotation(body) {
                        toks.push(Token {
                            tok: Tok::Annotation(a),
                            span: start..i,
                        });
                    }
                }
                None => {
                    errs.push((start..start + 2, "unterminated comment".to_string()));
                    i = b.len();
                }
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let start = i;
            let end = text[i..].find('\n').map_or(b.len(), |e| i + e);
            if let Some(a) = annotation(&text[i + 2..end]) {
                toks.push(Token {
                    tok: Tok::Annotation(a),
                    span: start..end,
                });
            }
            i = end;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Token {
                tok: Tok::Ident(text[start..i].to_string()),
                span: start..i,
            });
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            match number(&text[start..i]) {
                Some(n) => toks.push(Token {
                    tok: Tok::Number(n),
                    span: start..i,
                }),
                None => {
                    errs.push((start..i, format!("invalid number `{}`", &text[start..i])));
                    toks.push(Token {
                        tok: Tok::Number(0),
                        span: start..i,
                    });
                }
            }
        } else if c == b'"' {
            let start = i;
            match text[i + 1..].find(['"', '\n']) {
                Some(end) if b[i + 1 + end] == b'"' => {
                    toks.push(Token {
                        tok: Tok::Str(text[i + 1..i + 1 + end].to_string()),
                        span: start..i + 2 + end,
                    });
                    i += end + 2;
                }
                _ => {
                    errs.push((start..start + 1, "unterminated string literal".to_string()));
                    i += 1;
                }
            }
        } else if PUNCT.contains(&c) {
            toks.push(Token {
                tok: Tok::Punct(c as char),
                span: i..i + 1,
            });
            i += 1;
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            let len = ch.len_utf8();
            errs.push((i..i + len, format!("unexpected character `{ch}`")));
            i += len;
        }
    }
    toks.push(Token {
        tok: Tok::Eof,
        span: b.len()..b.len(),
    });
    (toks, errs)
}

/// `@word` alone in a comment body.
fn annotation(body: &str) -> Option<String> {
    let t = body.trim().strip_prefix('@')?;
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Some(t.to_string())
    } else {
        None
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
        lex(s).0.into_iter().map(|t| t.tok).collect()
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
        assert!(!lex("0x").1.is_empty());
        assert!(!lex("99999999999999999999999").1.is_empty());
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
        assert!(!lex("/* open").1.is_empty());
    }
}
