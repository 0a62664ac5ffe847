//! Lua text: an indenting line writer and the quoting of names and strings, in one place.

/// Lua's reserved words (Lua 5.2 manual section 3.1), which cannot follow a `.`.
const KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// Lines of Lua with two-space indentation.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    out: String,
    indent: usize,
}

impl Writer {
    /// One line at the current indentation (an empty line stays empty).
    pub(crate) fn line(&mut self, text: impl AsRef<str>) {
        let text = text.as_ref();
        if !text.is_empty() {
            for _ in 0..self.indent {
                self.out.push_str("  ");
            }
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// A line that opens a block (`function ... `, `if ... then`, `do`): what follows is
    /// indented until [`Writer::close`].
    pub(crate) fn open(&mut self, text: impl AsRef<str>) {
        self.line(text);
        self.indent += 1;
    }

    /// A line that closes the innermost block (`end`, `else`, `}`).
    pub(crate) fn close(&mut self, text: impl AsRef<str>) {
        self.indent = self.indent.saturating_sub(1);
        self.line(text);
    }

    /// Closes a block and opens the next at the same level (`else`, `elseif ... then`).
    pub(crate) fn reopen(&mut self, text: impl AsRef<str>) {
        self.close(text);
        self.indent += 1;
    }

    /// Comment lines (`-- `), one per line of `text`.
    pub(crate) fn comment(&mut self, text: &str) {
        for l in text.lines() {
            if l.is_empty() {
                self.line("--");
            } else {
                self.line(format!("-- {l}"));
            }
        }
    }

    /// Text copied as it is (the fixed parts).
    pub(crate) fn raw(&mut self, text: &str) {
        self.out.push_str(text);
        if !text.ends_with('\n') {
            self.out.push('\n');
        }
    }

    /// The text written.
    pub(crate) fn finish(self) -> String {
        self.out
    }
}

/// A Lua string literal for `s`.
pub(crate) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\{}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `table.key` when `key` is a Lua name, `table["key"]` otherwise.
pub(crate) fn index(table: &str, key: &str) -> String {
    let is_name = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&key);
    if is_name {
        format!("{table}.{key}")
    } else {
        format!("{table}[{}]", string(key))
    }
}

/// Text for a one-line comment: no line breaks.
pub(crate) fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
        assert_eq!(string("\u{1}"), r#""\1""#);
    }

    #[test]
    fn keys_that_are_not_names_are_bracketed() {
        assert_eq!(index("D", "rpcrdma2_msg"), "D.rpcrdma2_msg");
        assert_eq!(index("D", "end"), "D[\"end\"]");
        assert_eq!(index("F", "a.b"), "F[\"a.b\"]");
        assert_eq!(index("D", "2x"), "D[\"2x\"]");
    }

    #[test]
    fn blocks_indent() {
        let mut w = Writer::default();
        w.open("if x then");
        w.line("y()");
        w.reopen("else");
        w.line("");
        w.close("end");
        assert_eq!(w.finish(), "if x then\n  y()\nelse\n\nend\n");
    }
}
