//! Extraction of XDR from Internet-Draft / RFC plain text.
//!
//! Drafts publish their XDR in three ways, and each has a [`Mode`]:
//!
//! * [`Mode::TripleSlash`]: every XDR line is prefixed with `///`
//!   (draft-cel-nfsv4-rpcrdma-version-two section 6.2). The output is exactly what the
//!   draft's own recipe `sed -n -e 's:^ */// ::p' -e 's:^ *///$::p'` prints; with `split`,
//!   the result is then cut at `FILE ENDS: name` markers the way the draft's Perl script
//!   intends (its regular expression is fixed, see `specs/ERRATA.md`).
//! * [`Mode::CodeBlocks`]: code between `<CODE BEGINS>` and `<CODE ENDS>`
//!   (draft-ietf-nfsv4-rfc5666bis section 5.6), with page footers, form feeds and page
//!   headers removed and the common indentation stripped.
//! * [`Mode::Sections`]: the indented code of numbered sections of an old draft that has no
//!   markers at all (draft-ietf-nfsv4-rpcrdma-00 sections 4.2 and 6.2); prose is dropped.
//!
//! The module is pure text processing on `std` only: it does not parse XDR, so the files it
//! yields keep the drafts' defects for the compiler to diagnose.

use std::fmt;

/// How to find the XDR in a draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Pick the convention from the text: `///` lines first (split at `FILE ENDS:` markers
    /// when there are any), then `<CODE BEGINS>` blocks. Numbered sections are never
    /// guessed; ask for them with [`Mode::Sections`].
    Auto,
    /// Lines prefixed with `///`; `split` cuts the result at `FILE ENDS: name` markers.
    TripleSlash {
        /// Cut the output at `FILE ENDS:` markers into one file per marker.
        split: bool,
    },
    /// Blocks between `<CODE BEGINS>` and `<CODE ENDS>`.
    CodeBlocks,
    /// The indented code of the named sections (e.g. `"4.2"`), in the order given.
    Sections(Vec<String>),
}

/// One file produced by [`extract`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedFile {
    /// File name: the `name` passed to [`extract`], a `FILE ENDS:` marker's name or a
    /// `<CODE BEGINS> file "name"` name.
    pub name: String,
    /// The XDR text, `\n`-terminated lines.
    pub contents: String,
}

/// Why extraction failed. Line numbers are 1-based lines of the draft text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtractError {
    /// The input is empty or only whitespace.
    EmptyInput,
    /// [`Mode::Auto`] found neither `///` lines nor `<CODE BEGINS>` blocks.
    NoXdrFound,
    /// The chosen convention matched nothing (e.g. no `///` line at all).
    NothingExtracted {
        /// The convention that was asked for.
        mode: &'static str,
    },
    /// A `<CODE BEGINS>` has no matching `<CODE ENDS>`.
    UnterminatedCodeBlock {
        /// Line of the `<CODE BEGINS>`.
        line: usize,
    },
    /// A `<CODE BEGINS>` appears inside an open block.
    NestedCodeBegins {
        /// Line of the second `<CODE BEGINS>`.
        line: usize,
        /// Line of the block still open.
        open_line: usize,
    },
    /// A `<CODE ENDS>` has no `<CODE BEGINS>` before it.
    UnmatchedCodeEnds {
        /// Line of the `<CODE ENDS>`.
        line: usize,
    },
    /// A `FILE ENDS:` marker or `<CODE BEGINS> file` names no usable file name.
    BadFileName {
        /// Line of the marker.
        line: usize,
        /// The name as written.
        name: String,
    },
    /// No heading for the requested section.
    SectionNotFound {
        /// The section asked for.
        section: String,
        /// Numbers of the sections the text has, in order.
        available: Vec<String>,
    },
    /// A section number that is not of the form `4` or `4.2.1`.
    BadSectionNumber {
        /// The section asked for.
        section: String,
    },
    /// The section exists but holds no indented XDR.
    SectionHasNoCode {
        /// The section asked for.
        section: String,
        /// Line of its heading.
        line: usize,
    },
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtractError::EmptyInput => write!(f, "the draft text is empty"),
            ExtractError::NoXdrFound => write!(
                f,
                "found neither `///` lines nor `<CODE BEGINS>` blocks; \
                 name the sections that hold the XDR (e.g. `--section 4.2`)"
            ),
            ExtractError::NothingExtracted { mode } => {
                write!(f, "no XDR found with the {mode} convention")
            }
            ExtractError::UnterminatedCodeBlock { line } => {
                write!(
                    f,
                    "line {line}: `<CODE BEGINS>` has no matching `<CODE ENDS>`"
                )
            }
            ExtractError::NestedCodeBegins { line, open_line } => write!(
                f,
                "line {line}: `<CODE BEGINS>` inside the block opened at line {open_line} \
                 (missing `<CODE ENDS>`?)"
            ),
            ExtractError::UnmatchedCodeEnds { line } => {
                write!(f, "line {line}: `<CODE ENDS>` without a `<CODE BEGINS>`")
            }
            ExtractError::BadFileName { line, name } => write!(
                f,
                "line {line}: `{name}` is not a usable file name \
                 (expected a plain name such as `common.x`)"
            ),
            ExtractError::SectionNotFound { section, available } => {
                write!(f, "section {section} not found")?;
                if available.is_empty() {
                    write!(f, "; the text has no numbered section headings")
                } else {
                    write!(f, "; sections present: {}", available.join(", "))
                }
            }
            ExtractError::BadSectionNumber { section } => write!(
                f,
                "`{section}` is not a section number (expected digits and dots, e.g. `4.2`)"
            ),
            ExtractError::SectionHasNoCode { section, line } => {
                write!(f, "section {section} (line {line}) holds no indented XDR")
            }
        }
    }
}

impl std::error::Error for ExtractError {}

/// Extracts the XDR of `text` with `mode`.
///
/// `name` is the file name of the single output of [`Mode::TripleSlash`] without split,
/// [`Mode::Sections`] and unnamed [`Mode::CodeBlocks`] blocks; with split, text after the
/// last `FILE ENDS:` marker (if any is not blank) goes to `name` too.
///
/// ```
/// use rpcrdma_xdrgen::extract::{extract, Mode};
///
/// let draft = "   <CODE BEGINS>\n      const A = 1;\n   <CODE ENDS>\n";
/// let files = extract(draft, &Mode::Auto, "a.x").unwrap();
/// assert_eq!(files[0].name, "a.x");
/// assert_eq!(files[0].contents, "const A = 1;\n");
/// ```
pub fn extract(text: &str, mode: &Mode, name: &str) -> Result<Vec<ExtractedFile>, ExtractError> {
    if text.trim().is_empty() {
        return Err(ExtractError::EmptyInput);
    }
    match mode {
        Mode::Auto => {
            let slashed = triple_slash(text);
            if !slashed.is_empty() {
                let split = has_file_ends_marker(&slashed);
                return finish_triple_slash(slashed, split, name);
            }
            if lines(text).any(|l| is_code_begins(l.text)) {
                return code_blocks(text, name);
            }
            Err(ExtractError::NoXdrFound)
        }
        Mode::TripleSlash { split } => {
            let slashed = triple_slash(text);
            if slashed.is_empty() {
                return Err(ExtractError::NothingExtracted { mode: "`///`" });
            }
            finish_triple_slash(slashed, *split, name)
        }
        Mode::CodeBlocks => code_blocks(text, name),
        Mode::Sections(sections) => {
            let contents = extract_sections(text, sections)?;
            Ok(vec![ExtractedFile {
                name: name.to_owned(),
                contents,
            }])
        }
    }
}

fn finish_triple_slash(
    slashed: String,
    split: bool,
    name: &str,
) -> Result<Vec<ExtractedFile>, ExtractError> {
    if split {
        split_file_ends(&slashed, name)
    } else {
        Ok(vec![ExtractedFile {
            name: name.to_owned(),
            contents: slashed,
        }])
    }
}

/// A line of the input with its 1-based line number.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    number: usize,
    text: &'a str,
}

fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.lines().enumerate().map(|(i, text)| Line {
        number: i + 1,
        text,
    })
}

// ---------------------------------------------------------------------------------------
// `///` convention
// ---------------------------------------------------------------------------------------

/// Exactly what `sed -n -e 's:^ */// ::p' -e 's:^ *///$::p'` prints for `text`
/// (draft-cel-nfsv4-rpcrdma-version-two-09 section 6.2).
///
/// Both substitutions run on every line, the second on the result of the first, and each
/// successful one prints; ` *` matches spaces only. As with GNU sed, the output ends
/// without a newline only if the last printed line was the input's unterminated last line.
pub fn triple_slash(text: &str) -> String {
    let mut out = String::new();
    let mut last_unterminated = false;
    let mut rest = text;
    while !rest.is_empty() {
        let (line, terminated) = match rest.find('\n') {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                (line, true)
            }
            None => {
                let line = rest;
                rest = "";
                (line, false)
            }
        };
        let mut pattern = line;
        let mut printed = Vec::new();
        // s:^ */// ::p
        if let Some(after) = pattern.trim_start_matches(' ').strip_prefix("/// ") {
            pattern = after;
            printed.push(pattern);
        }
        // s:^ *///$::p
        if pattern.trim_start_matches(' ') == "///" {
            pattern = "";
            printed.push(pattern);
        }
        for p in printed {
            if last_unterminated {
                out.push('\n');
            }
            out.push_str(p);
            if terminated {
                out.push('\n');
                last_unterminated = false;
            } else {
                last_unterminated = true;
            }
        }
    }
    out
}

const FILE_ENDS: &str = "FILE ENDS:";

fn has_file_ends_marker(text: &str) -> bool {
    text.lines().any(|l| l.contains(FILE_ENDS))
}

/// Cuts `text` at lines holding `FILE ENDS: name`, as the Perl script of
/// draft-cel-nfsv4-rpcrdma-version-two-09 section 6.2 intends: the lines before a marker
/// form the file `name`, the marker line itself is dropped.
///
/// The draft's script captures everything after `FILE ENDS: ` up to the end of the line
/// (`common.x; */`) and its `rename` then fails silently, losing the file. Here the name
/// ends at the first `;`, blank or `*/` (recorded in `specs/ERRATA.md`). Text after the
/// last marker goes to `rest_name` when it is not blank.
pub fn split_file_ends(text: &str, rest_name: &str) -> Result<Vec<ExtractedFile>, ExtractError> {
    let mut files: Vec<ExtractedFile> = Vec::new();
    let mut current = String::new();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        match line.find(FILE_ENDS) {
            Some(at) => {
                let raw = line[at + FILE_ENDS.len()..].trim_end_matches(['\n', '\r']);
                let name = marker_file_name(raw).ok_or_else(|| ExtractError::BadFileName {
                    line: index + 1,
                    name: raw.trim().to_owned(),
                })?;
                push_file(&mut files, name, std::mem::take(&mut current));
            }
            None => current.push_str(line),
        }
    }
    if !current.trim().is_empty() || files.is_empty() {
        push_file(&mut files, rest_name.to_owned(), current);
    }
    Ok(files)
}

/// Appends to an existing file of the same name, so a name given twice collects both parts.
fn push_file(files: &mut Vec<ExtractedFile>, name: String, contents: String) {
    match files.iter_mut().find(|f| f.name == name) {
        Some(f) => f.contents.push_str(&contents),
        None => files.push(ExtractedFile { name, contents }),
    }
}

/// The file name of a `FILE ENDS:` marker: up to the first `;`, blank or `*/`.
fn marker_file_name(raw: &str) -> Option<String> {
    let raw = raw.trim_start();
    let end = raw
        .find(|c: char| c == ';' || c.is_whitespace())
        .unwrap_or(raw.len());
    let mut name = &raw[..end];
    if let Some(i) = name.find("*/") {
        name = &name[..i];
    }
    is_plain_file_name(name).then(|| name.to_owned())
}

/// A name that stays inside the output directory.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '*', '"'])
        && !name.chars().any(char::is_control)
}

// ---------------------------------------------------------------------------------------
// <CODE BEGINS> / <CODE ENDS>
// ---------------------------------------------------------------------------------------

fn is_code_begins(line: &str) -> bool {
    line.trim_start_matches(['\u{c}', ' '])
        .starts_with("<CODE BEGINS>")
}

fn is_code_ends(line: &str) -> bool {
    line.trim_start_matches(['\u{c}', ' '])
        .starts_with("<CODE ENDS>")
}

/// `<CODE BEGINS> file "rpcrdma.x"` (RFC 8166 style) names its file.
fn code_block_file_name(line: Line<'_>) -> Result<Option<String>, ExtractError> {
    let after = line.text.trim_start_matches(['\u{c}', ' '])["<CODE BEGINS>".len()..].trim();
    let Some(after) = after.strip_prefix("file") else {
        return Ok(None);
    };
    let quoted = after.trim();
    let name = quoted
        .strip_prefix('"')
        .and_then(|q| q.split('"').next())
        .unwrap_or(quoted);
    if is_plain_file_name(name) {
        Ok(Some(name.to_owned()))
    } else {
        Err(ExtractError::BadFileName {
            line: line.number,
            name: quoted.to_owned(),
        })
    }
}

fn code_blocks(text: &str, name: &str) -> Result<Vec<ExtractedFile>, ExtractError> {
    let mut files: Vec<ExtractedFile> = Vec::new();
    let mut open: Option<(Line<'_>, Option<String>, Vec<Line<'_>>)> = None;
    for line in lines(text) {
        if is_code_begins(line.text) {
            if let Some((begin, _, _)) = &open {
                return Err(ExtractError::NestedCodeBegins {
                    line: line.number,
                    open_line: begin.number,
                });
            }
            open = Some((line, code_block_file_name(line)?, Vec::new()));
        } else if is_code_ends(line.text) {
            let Some((_, file_name, body)) = open.take() else {
                return Err(ExtractError::UnmatchedCodeEnds { line: line.number });
            };
            let code = dedent(&strip_page_breaks(&body));
            if code.is_empty() {
                continue;
            }
            let file_name = file_name.unwrap_or_else(|| name.to_owned());
            match files.iter_mut().find(|f| f.name == file_name) {
                Some(f) => {
                    f.contents.push('\n');
                    f.contents.push_str(&code);
                }
                None => files.push(ExtractedFile {
                    name: file_name,
                    contents: code,
                }),
            }
        } else if let Some((_, _, body)) = &mut open {
            body.push(line);
        }
    }
    if let Some((begin, _, _)) = open {
        return Err(ExtractError::UnterminatedCodeBlock { line: begin.number });
    }
    if files.is_empty() {
        return Err(ExtractError::NothingExtracted {
            mode: "`<CODE BEGINS>`",
        });
    }
    Ok(files)
}

// ---------------------------------------------------------------------------------------
// Page breaks
// ---------------------------------------------------------------------------------------

/// `Lever, et al.   Expires June 16, 2016   [Page 31]`
fn is_page_footer(line: &str) -> bool {
    let t = line.trim_end();
    let Some(open) = t.rfind("[Page ") else {
        return false;
    };
    let number = &t[open + "[Page ".len()..];
    number
        .strip_suffix(']')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `Internet-Draft   RDMA Transport for RPC   December 2015` or `RFC 8166   ...`
fn is_page_header(line: &str) -> bool {
    let t = line.trim_start_matches('\u{c}');
    t.starts_with("Internet-Draft") || (t.starts_with("RFC ") && t.contains("  "))
}

fn is_blank(line: &str) -> bool {
    line.trim_matches(|c: char| c.is_whitespace() || c == '\u{c}')
        .is_empty()
}

/// Removes RFC-style page breaks: the blank lines before a page footer, the footer, form
/// feeds, the next page's header and the blank lines after it.
fn strip_page_breaks<'a>(input: &[Line<'a>]) -> Vec<Line<'a>> {
    let mut out: Vec<Line<'a>> = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let line = input[i];
        if !is_page_footer(line.text) {
            out.push(line);
            i += 1;
            continue;
        }
        while out.last().is_some_and(|l| is_blank(l.text)) {
            out.pop();
        }
        let before = out.last().map(|l| l.text.trim());
        let footer = line.number;
        i += 1;
        // Form feed and blank lines between footer and header.
        let mut j = i;
        while j < input.len() && is_blank(input[j].text) {
            j += 1;
        }
        if j < input.len() && is_page_header(input[j].text) {
            j += 1;
            while j < input.len() && is_blank(input[j].text) {
                j += 1;
            }
            i = j;
        } else if j < input.len() && input[i..j].iter().any(|l| l.text.contains('\u{c}')) {
            // A form feed without a header: still a page break.
            i = j;
        }
        // The page break swallowed the blank line between two definitions: put it back.
        let ends_definition = before.is_some_and(|b| b == "};" || b.starts_with("} ="));
        if ends_definition && input.get(i).is_some_and(|l| starts_xdr(l.text)) {
            out.push(Line {
                number: footer,
                text: "",
            });
        }
    }
    out
}

/// Removes the indentation common to all non-blank lines, trailing blanks of every line,
/// and leading and trailing blank lines; the result ends with a newline unless empty.
fn dedent(body: &[Line<'_>]) -> String {
    let indent = body
        .iter()
        .filter(|l| !is_blank(l.text))
        .map(|l| l.text.len() - l.text.trim_start_matches(' ').len())
        .min()
        .unwrap_or(0);
    let mut out_lines: Vec<&str> = body
        .iter()
        .map(|l| {
            if is_blank(l.text) {
                ""
            } else {
                l.text[indent..].trim_end()
            }
        })
        .collect();
    while out_lines.last() == Some(&"") {
        out_lines.pop();
    }
    let first = out_lines.iter().position(|l| !l.is_empty());
    let Some(first) = first else {
        return String::new();
    };
    let mut out = String::new();
    for l in &out_lines[first..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------
// Numbered sections
// ---------------------------------------------------------------------------------------

/// `4.2.  XDR Language Description` at column 0 gives `Some("4.2")`.
fn section_heading_number(line: &str) -> Option<&str> {
    let first = line.as_bytes().first()?;
    if !first.is_ascii_digit() {
        return None;
    }
    let end = line
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(line.len());
    let number = &line[..end];
    let rest = &line[end..];
    // A heading has a title after the number: "4.2.  Title".
    if !rest.starts_with(' ') || rest.trim().is_empty() || number.contains("..") {
        return None;
    }
    let number = number.trim_end_matches('.');
    number.split('.').all(|p| !p.is_empty()).then_some(number)
}

fn is_within(number: &str, section: &str) -> bool {
    number == section
        || number
            .strip_prefix(section)
            .is_some_and(|rest| rest.starts_with('.'))
}

fn extract_sections(text: &str, sections: &[String]) -> Result<String, ExtractError> {
    let all: Vec<Line<'_>> = lines(text).collect();
    let headings: Vec<(usize, &str)> = all
        .iter()
        .enumerate()
        .filter_map(|(i, l)| section_heading_number(l.text).map(|n| (i, n)))
        .collect();
    let mut out = String::new();
    for section in sections {
        let section = section.trim().trim_end_matches('.');
        if section.is_empty()
            || !section
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(ExtractError::BadSectionNumber {
                section: section.to_owned(),
            });
        }
        // The last heading with this number: a table of contents is indented, but an
        // unindented one would come first.
        let Some(pos) = headings.iter().rposition(|(_, n)| *n == section) else {
            return Err(ExtractError::SectionNotFound {
                section: section.to_owned(),
                available: headings.iter().map(|(_, n)| (*n).to_owned()).collect(),
            });
        };
        let start = headings[pos].0;
        let end = headings[pos + 1..]
            .iter()
            .find(|(_, n)| !is_within(n, section))
            .map_or(all.len(), |(i, _)| *i);
        let body = strip_page_breaks(&all[start + 1..end]);
        let code = section_code(&body);
        if code.is_empty() {
            return Err(ExtractError::SectionHasNoCode {
                section: section.to_owned(),
                line: all[start].number,
            });
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&code);
    }
    Ok(out)
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Words that start an XDR definition (RFC 4506 section 6.3, RFC 5531 section 12.2) or a
/// comment / rpcgen pass-through line.
fn starts_xdr(line: &str) -> bool {
    let t = line.trim_start();
    const STARTS: [&str; 9] = [
        "struct ", "union ", "enum ", "typedef ", "const ", "program ", "/*", "%", "#",
    ];
    STARTS.iter().any(|s| t.starts_with(s))
}

/// Brace depth and comment state of XDR lines, enough to tell whether a paragraph
/// continues an open definition.
#[derive(Default)]
struct CodeState {
    depth: i64,
    in_comment: bool,
}

impl CodeState {
    fn feed(&mut self, line: &str) {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if self.in_comment {
                if bytes[i..].starts_with(b"*/") {
                    self.in_comment = false;
                    i += 2;
                    continue;
                }
            } else if bytes[i..].starts_with(b"/*") {
                self.in_comment = true;
                i += 2;
                continue;
            } else if bytes[i] == b'{' {
                self.depth += 1;
            } else if bytes[i] == b'}' {
                self.depth -= 1;
            }
            i += 1;
        }
    }

    fn inside(&self) -> bool {
        self.depth > 0 || self.in_comment
    }
}

/// Keeps the code paragraphs of a section body: paragraphs (runs of non-blank lines)
/// indented deeper than the prose that start an XDR definition or continue one still open.
fn section_code(body: &[Line<'_>]) -> String {
    let prose_indent = body
        .iter()
        .filter(|l| !is_blank(l.text))
        .map(|l| indentation(l.text))
        .min()
        .unwrap_or(0);
    let mut kept: Vec<Line<'_>> = Vec::new();
    let mut state = CodeState::default();
    let mut i = 0;
    while i < body.len() {
        if is_blank(body[i].text) {
            i += 1;
            continue;
        }
        let start = i;
        while i < body.len() && !is_blank(body[i].text) {
            i += 1;
        }
        let paragraph = &body[start..i];
        let deeper = paragraph.iter().all(|l| indentation(l.text) > prose_indent);
        let code = deeper && (state.inside() || starts_xdr(paragraph[0].text));
        if code {
            if !kept.is_empty() {
                kept.push(Line {
                    number: paragraph[0].number,
                    text: "",
                });
            }
            for l in paragraph {
                state.feed(l.text);
                kept.push(*l);
            }
        }
    }
    dedent(&kept)
}
