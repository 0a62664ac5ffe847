//! Diagnostics: rustc-style errors, warnings and notes with file, line, column, the source line
//! and a caret, plus fix-it hints (rendered by `codespan-reporting`).

use std::collections::HashSet;

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};

use crate::ast::{FileId, Loc};

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Informational.
    Note,
    /// Accepted, but worth fixing (lenient-mode quirks).
    Warning,
    /// The input is rejected.
    Error,
}

/// One diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Severity.
    pub severity: Severity,
    /// The headline.
    pub message: String,
    /// The primary location and its label.
    pub primary: Option<(Loc, String)>,
    /// Further locations.
    pub secondary: Vec<(Loc, String)>,
    /// `= help: ...` lines (fix-it hints).
    pub help: Vec<String>,
    /// `= note: ...` lines.
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// A diagnostic of `severity` at `loc`.
    pub fn new(severity: Severity, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            help: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// An error.
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(Severity::Error, message)
    }

    /// A warning.
    pub fn warning(message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, message)
    }

    /// An error in strict mode, a warning in lenient mode.
    pub fn quirk(lenient: bool, message: impl Into<String>) -> Self {
        let sev = if lenient {
            Severity::Warning
        } else {
            Severity::Error
        };
        Self::new(sev, message)
    }

    /// Sets the primary location.
    pub fn at(mut self, loc: &Loc, label: impl Into<String>) -> Self {
        self.primary = Some((loc.clone(), label.into()));
        self
    }

    /// Adds a secondary location.
    pub fn also(mut self, loc: &Loc, label: impl Into<String>) -> Self {
        self.secondary.push((loc.clone(), label.into()));
        self
    }

    /// Adds a fix-it hint.
    pub fn help(mut self, text: impl Into<String>) -> Self {
        self.help.push(text.into());
        self
    }

    /// Adds a note.
    pub fn note(mut self, text: impl Into<String>) -> Self {
        self.notes.push(text.into());
        self
    }
}

/// The source files of one compilation, for rendering.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    files: Vec<(String, String)>,
}

impl Sources {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        self.files.push((name.into(), text.into()));
        FileId(self.files.len() - 1)
    }

    /// The display name of a file.
    pub fn name(&self, id: FileId) -> &str {
        self.files
            .get(id.0)
            .map(|f| f.0.as_str())
            .unwrap_or("<unknown>")
    }

    /// The text of a file.
    pub fn text(&self, id: FileId) -> &str {
        self.files.get(id.0).map(|f| f.1.as_str()).unwrap_or("")
    }

    /// The number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there are no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, id: FileId, offset: usize) -> (usize, usize) {
        let text = self.text(id);
        let offset = offset.min(text.len());
        let before = &text.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        (line, offset - line_start + 1)
    }

    /// `file:line` of a location, for doc comments.
    pub fn file_line(&self, loc: &Loc) -> String {
        let (line, _) = self.line_col(loc.file, loc.span.start);
        format!("{}:{}", short_name(self.name(loc.file)), line)
    }

    /// Renders diagnostics as rustc-style text (no colour).
    pub fn render(&self, diags: &[Diagnostic]) -> String {
        let mut buf = termcolor::NoColor::new(Vec::new());
        self.emit(&mut buf, diags);
        String::from_utf8_lossy(&buf.into_inner()).into_owned()
    }

    /// Renders diagnostics to a terminal writer (colour if it supports it).
    pub fn emit(&self, out: &mut dyn termcolor::WriteColor, diags: &[Diagnostic]) {
        let mut files = SimpleFiles::new();
        for (name, text) in &self.files {
            files.add(name.clone(), text.clone());
        }
        let config = term::Config {
            chars: term::Chars::ascii(),
            ..term::Config::default()
        };
        for d in diags {
            let cs = to_codespan(d, self);
            // Rendering only fails on I/O errors of `out` or on a span that does not fit the
            // file; spans are clamped in `to_codespan`, and a failing writer has nowhere to
            // report to.
            let _ = term::emit(out, &config, &files, &cs);
        }
    }
}

/// The file name without directories, for doc comments (deterministic across machines).
pub fn short_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

fn clamp(sources: &Sources, loc: &Loc) -> std::ops::Range<usize> {
    let len = sources.text(loc.file).len();
    let mut start = loc.span.start.min(len);
    let mut end = loc.span.end.min(len).max(start);
    let text = sources.text(loc.file);
    while start > 0 && !text.is_char_boundary(start) {
        start -= 1;
    }
    while end < len && !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

fn to_codespan(d: &Diagnostic, sources: &Sources) -> CsDiagnostic<usize> {
    let cs = match d.severity {
        Severity::Error => CsDiagnostic::error(),
        Severity::Warning => CsDiagnostic::warning(),
        Severity::Note => CsDiagnostic::note(),
    }
    .with_message(d.message.clone());
    let mut labels = Vec::new();
    if let Some((loc, label)) = &d.primary {
        if loc.file.0 < sources.len() {
            labels.push(Label::primary(loc.file.0, clamp(sources, loc)).with_message(label));
        }
    }
    for (loc, label) in &d.secondary {
        if loc.file.0 < sources.len() {
            labels.push(Label::secondary(loc.file.0, clamp(sources, loc)).with_message(label));
        }
    }
    let mut notes: Vec<String> = d.help.iter().map(|h| format!("help: {h}")).collect();
    notes.extend(d.notes.iter().map(|n| format!("note: {n}")));
    cs.with_labels(labels).with_notes(notes)
}

/// Diagnostics collected while compiling.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics {
    /// All diagnostics in the order they were found.
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Adds one.
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    /// Whether any is an error.
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }

    /// Puts the diagnostics in reading order, by file (in the order files were read) and
    /// position, those without a location last; diagnostics at the same position keep the
    /// order they were found in. An exact repeat (same severity, message and primary
    /// location as an earlier one, as when a constant is evaluated at each of its uses) is
    /// dropped.
    pub fn tidy(&mut self) {
        let mut seen = HashSet::new();
        self.items
            .retain(|d| seen.insert((d.severity, d.message.clone(), d.primary.clone())));
        self.items.sort_by_key(|d| {
            d.primary
                .as_ref()
                .map_or((usize::MAX, usize::MAX), |(loc, _)| {
                    (loc.file.0, loc.span.start)
                })
        });
    }

    /// The number of errors.
    pub fn error_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }
}

/// Levenshtein distance, for "did you mean" suggestions.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest candidate to `name`, if close enough to be a plausible typo.
pub fn did_you_mean<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(&name.to_ascii_lowercase(), &c.to_ascii_lowercase());
        if d <= limit
            && match best {
                None => true,
                Some((bd, bc)) => d < bd || (d == bd && c < bc),
            }
        {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(
            did_you_mean("uint23", ["uint32", "bool"].into_iter()),
            Some("uint32")
        );
        assert_eq!(did_you_mean("xyz", ["uint32"].into_iter()), None);
    }

    #[test]
    fn line_col() {
        let mut s = Sources::new();
        let f = s.add("a.x", "ab\ncd\n");
        assert_eq!(s.line_col(f, 0), (1, 1));
        assert_eq!(s.line_col(f, 4), (2, 2));
    }
}
