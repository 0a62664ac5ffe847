//! Upper Layer Binding files: DDP-eligibility marks kept outside the `.x` file.
//!
//! Real bindings (RFC 8267 for NFS) are documents separate from the protocol's XDR, so marks
//! can live in a small file next to it. One mark per line, `Type.member`, naming a declaration
//! in a struct or a union arm; `#` starts a comment; blank lines are ignored:
//!
//! ```text
//! # RFC 8267 section 4: NFS version 3 DDP-eligible items
//! WRITE3args.data
//! READ3resok.data    # the payload of a successful READ
//! ```
//!
//! The same syntax is used by `xdrgen --ddp Type.member` and [`crate::Config::ddp`].

use std::ops::Range;

/// One mark as written: `type_name.member` at a byte range of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkText {
    /// The struct or union the member belongs to, as named in the XDR.
    pub type_name: String,
    /// The declaration's name (a struct field or a union arm's declaration).
    pub member: String,
    /// Byte range of the mark in the text it came from.
    pub span: Range<usize>,
}

/// A line of a binding file that is not a mark: the byte range and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingError {
    /// Byte range of the offending text.
    pub span: Range<usize>,
    /// What is wrong.
    pub message: String,
}

/// Parses a binding file's text (or `--ddp` arguments joined by newlines).
pub fn parse_binding(text: &str) -> Result<Vec<MarkText>, BindingError> {
    let mut marks = Vec::new();
    let mut line_start = 0;
    for raw in text.split_inclusive('\n') {
        let content = raw
            .split('#')
            .next()
            .unwrap_or("")
            .trim_end_matches(['\n', '\r']);
        let lead = content.len() - content.trim_start().len();
        let trimmed = content.trim();
        let start = line_start + lead;
        line_start += raw.len();
        if trimmed.is_empty() {
            continue;
        }
        let span = start..start + trimmed.len();
        let error = |message: String| BindingError {
            span: span.clone(),
            message,
        };
        if trimmed.split_whitespace().count() > 1 {
            return Err(error(format!(
                "expected one `Type.member` per line, found `{trimmed}`"
            )));
        }
        let (type_name, member) = trimmed
            .split_once('.')
            .ok_or_else(|| error(format!("`{trimmed}` is not of the form `Type.member`")))?;
        for part in [type_name, member] {
            if !is_identifier(part) {
                return Err(error(format!(
                    "`{part}` in `{trimmed}` is not an XDR identifier"
                )));
            }
        }
        marks.push(MarkText {
            type_name: type_name.into(),
            member: member.into(),
            span,
        });
    }
    Ok(marks)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_marks_comments_and_blank_lines() {
        let text = "# NFSv3\n\nWRITE3args.data\n  READ3resok.data   # READ payload\n";
        let marks = parse_binding(text).unwrap();
        assert_eq!(marks.len(), 2);
        assert_eq!(marks[1].type_name, "READ3resok");
        assert_eq!(marks[1].member, "data");
        assert_eq!(&text[marks[1].span.clone()], "READ3resok.data");
    }

    #[test]
    fn rejects_malformed_lines_with_their_position() {
        let text = "ok.mark\n   nodot\n";
        let err = parse_binding(text).unwrap_err();
        assert_eq!(&text[err.span.clone()], "nodot");
        assert!(err.message.contains("Type.member"), "{}", err.message);
        let err = parse_binding("A.b C.d\n").unwrap_err();
        assert!(err.message.contains("one `Type.member` per line"));
        let err = parse_binding("A.9x\n").unwrap_err();
        assert!(err.message.contains("not an XDR identifier"));
    }
}
