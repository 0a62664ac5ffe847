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

use std::fmt;

/// One DDP-eligibility mark: `type_name.member`, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdpMark {
    /// The struct or union the member belongs to, as named in the XDR.
    pub type_name: String,
    /// The declaration's name (a struct field or a union arm's declaration).
    pub member: String,
    /// Where the mark came from: a binding file's path, `--ddp`, or the build API.
    pub origin: MarkOrigin,
}

/// Where a [`DdpMark`] was written, for diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkOrigin {
    /// A binding file, 1-based line and column.
    File {
        /// The file's path as given.
        path: String,
        /// Line number.
        line: usize,
        /// Column of the mark's first character.
        column: usize,
    },
    /// The command line (`--ddp Type.member`) or the build.rs API.
    Argument,
}

impl fmt::Display for MarkOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkOrigin::File { path, line, column } => write!(f, "{path}:{line}:{column}"),
            MarkOrigin::Argument => f.write_str("command-line or build API mark"),
        }
    }
}

/// A line of a binding file that is not a mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingError {
    /// The file's path as given.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.path, self.line, self.column, self.message)
    }
}

impl std::error::Error for BindingError {}

/// Parses one mark written as `Type.member`.
pub fn parse_mark(text: &str, origin: MarkOrigin) -> Result<DdpMark, String> {
    let (type_name, member) = text
        .split_once('.')
        .ok_or_else(|| format!("`{text}` is not of the form `Type.member`"))?;
    for part in [type_name, member] {
        if !is_identifier(part) {
            return Err(format!("`{part}` in `{text}` is not an XDR identifier"));
        }
    }
    Ok(DdpMark { type_name: type_name.to_owned(), member: member.to_owned(), origin })
}

/// Parses a binding file's text; `path` is used in marks' origins and in errors.
pub fn parse_binding(path: &str, text: &str) -> Result<Vec<DdpMark>, BindingError> {
    let mut marks = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let content = raw.split('#').next().unwrap_or("");
        let trimmed = content.trim();
        if trimmed.is_empty() {
            continue;
        }
        let column = content.len() - content.trim_start().len() + 1;
        let error = |message: String| BindingError {
            path: path.to_owned(),
            line: index + 1,
            column,
            message,
        };
        if trimmed.split_whitespace().count() > 1 {
            return Err(error(format!("expected one `Type.member` per line, found `{trimmed}`")));
        }
        let origin = MarkOrigin::File { path: path.to_owned(), line: index + 1, column };
        marks.push(parse_mark(trimmed, origin).map_err(error)?);
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
        let marks = parse_binding("nfs3.ddp", text).unwrap();
        assert_eq!(marks.len(), 2);
        assert_eq!(marks[1].type_name, "READ3resok");
        assert_eq!(marks[1].member, "data");
        assert_eq!(
            marks[1].origin,
            MarkOrigin::File { path: "nfs3.ddp".into(), line: 4, column: 3 }
        );
    }

    #[test]
    fn rejects_malformed_lines_with_their_position() {
        let err = parse_binding("b.ddp", "ok.mark\n   nodot\n").unwrap_err();
        assert_eq!((err.line, err.column), (2, 4));
        assert!(err.message.contains("Type.member"), "{err}");
        let err = parse_binding("b.ddp", "A.b C.d\n").unwrap_err();
        assert!(err.message.contains("one `Type.member` per line"));
        let err = parse_binding("b.ddp", "A.9x\n").unwrap_err();
        assert!(err.message.contains("not an XDR identifier"));
    }
}
