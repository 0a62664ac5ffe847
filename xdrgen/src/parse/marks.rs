//! Which comments are annotations (`/* @ddp */`), which only look like a DDP mark, and which
//! are ordinary comments.
//!
//! A DDP mark is a comment whose whole text is `@ddp` (`/* @ddp */`, `// @ddp`, `//@ddp`):
//! the form `specs/nfs3.x` documents and other tools can match with a fixed pattern. A
//! comment that starts like one but departs from that form is reported, so that a field
//! never silently stops being DDP-eligible because of how its mark was spelled:
//!
//! * the word after the `@` is `ddp` in another case (`@DDP`), or follows a blank (`@ ddp`),
//!   or the comment is a doc comment (`/** @ddp */`, `/// @ddp`), or it goes on after the
//!   word (`/* @ddp: the payload */`). The intent is unambiguous: lenient mode reads it as
//!   the mark;
//! * the word alone in its comment is one edit from `ddp` (a letter changed, added or
//!   dropped, or two neighbours swapped, in any case: `@dpd`, `@dp`, `@ddpp`). That is a
//!   guess, and a wrong one would change which data moves as chunks: lenient mode warns and
//!   reads no mark.
//!
//! Everything else stays an ordinary comment: text that does not start with `@` (an e-mail
//! address, "see @ddp"), `@` followed by no word (SCCS's `@(#)`), a word further from `ddp`
//! (`@param len the length`; a distance of two would take in `@id`, `@up`, `@tmp`), and a
//! near word followed by more text (`@udp: port`), which reads as prose. A lone `@word` far
//! from `ddp` (`/* @deprecated */`) is an annotation xdrgen does not know, warned about where
//! it is attached.

use std::ops::Range;

use crate::ast::Loc;
use crate::diag::Diagnostic;

/// The only annotation xdrgen reads.
const DDP: &str = "ddp";

/// What a comment is, as far as annotations go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comment {
    /// An ordinary comment.
    Plain,
    /// An annotation: `@word` alone in the comment.
    Annotation(String),
    /// Text that looks like a DDP mark but is not one.
    Lookalike(Lookalike),
}

/// A comment that looks like a DDP mark but is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookalike {
    /// The `@` and the word as written (`@DDP`, `@ ddp`, `@dpd`).
    pub written: String,
    /// Where that is, in bytes from the start of the comment's text.
    pub at: Range<usize>,
    /// How it departs from the mark, most telling first (never empty).
    pub defects: Vec<Defect>,
    /// Whether the comment is a block comment (`/* */`) rather than a line comment (`//`).
    pub block: bool,
}

/// One way a comment departs from a DDP mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// The word is one edit from `ddp` (`@dpd`, `@ddpp`).
    Misspelled,
    /// `ddp` in another case (`@DDP`).
    Case,
    /// A blank between `@` and the word (`@ ddp`).
    Space,
    /// Doc-comment decoration around it (`/** @ddp */`, `/// @ddp`).
    Decorated,
    /// More text after the word (`/* @ddp: the payload */`).
    Text,
}

impl Defect {
    fn label(self) -> &'static str {
        match self {
            Defect::Misspelled => "misspelled",
            Defect::Case => "a mark is lower case",
            Defect::Space => "no blank goes after `@`",
            Defect::Decorated => "a mark is a plain comment, not a doc comment",
            Defect::Text => "a mark is alone in its comment",
        }
    }
}

impl Lookalike {
    /// Whether the intent is unambiguous (the word is `ddp`), so that lenient mode reads the
    /// comment as the mark.
    pub fn is_mark(&self) -> bool {
        !self.defects.contains(&Defect::Misspelled)
    }

    /// The diagnostic at `loc` (the `@` and the word): an error, a warning in lenient mode.
    pub fn diagnostic(&self, loc: &Loc, lenient: bool) -> Diagnostic {
        let mark = if self.block { "/* @ddp */" } else { "// @ddp" };
        let labels: Vec<&str> = self.defects.iter().map(|d| d.label()).collect();
        let mut d = Diagnostic::quirk(
            lenient,
            format!("`{}` looks like a DDP mark but is not one", self.written),
        )
        .at(loc, labels.join("; "))
        .help(format!("did you mean `{mark}`?"));
        if self.defects.contains(&Defect::Text) {
            d = d.help("put the rest of the comment in a comment of its own");
        }
        if self.is_mark() {
            d.note(format!("lenient mode reads it as `{mark}`"))
        } else {
            d.note("without a mark the declaration after it is not DDP-eligible; lenient mode does not read a misspelling as the mark")
        }
    }
}

/// Classifies the text of a comment (between `/*` and `*/`, or after `//`).
pub fn classify(body: &str, block: bool) -> Comment {
    let lead = body.len() - body.trim_start().len();
    let t = body.trim();
    if let Some(word) = t.strip_prefix('@') {
        if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            let defect = if word == DDP {
                return Comment::Annotation(word.to_string());
            } else if word.eq_ignore_ascii_case(DDP) {
                Defect::Case
            } else if one_edit_from_ddp(word) {
                Defect::Misspelled
            } else {
                return Comment::Annotation(word.to_string());
            };
            return Comment::Lookalike(Lookalike {
                written: t.to_string(),
                at: lead..lead + t.len(),
                defects: vec![defect],
                block,
            });
        }
    }
    let decoration = |c: char| c.is_whitespace() || matches!(c, '*' | '/' | '!');
    let core = t.trim_start_matches(decoration);
    let Some(after) = core.strip_prefix('@') else {
        return Comment::Plain;
    };
    let words = after.trim_start_matches([' ', '\t']);
    let word_len = words
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(words.len());
    let word = &words[..word_len];
    if word.is_empty() {
        return Comment::Plain;
    }
    let tail = &words[word_len..];
    // The text after the word, without a closing decoration (`/** @ddp **/`).
    let rest = tail.trim_end_matches(decoration);
    let mut defects = Vec::new();
    if word.eq_ignore_ascii_case(DDP) {
        if word != DDP {
            defects.push(Defect::Case);
        }
    } else if rest.is_empty() && one_edit_from_ddp(word) {
        defects.push(Defect::Misspelled);
    } else {
        return Comment::Plain;
    }
    if words.len() != after.len() {
        defects.push(Defect::Space);
    }
    if core.len() != t.len() || (rest.is_empty() && !tail.trim().is_empty()) {
        defects.push(Defect::Decorated);
    }
    if !rest.is_empty() {
        defects.push(Defect::Text);
    }
    let start = lead + (t.len() - core.len());
    let end = start + 1 + (after.len() - words.len()) + word_len;
    Comment::Lookalike(Lookalike {
        written: body[start..end].to_string(),
        at: start..end,
        defects,
        block,
    })
}

/// Whether `word` (any case) is one edit from `ddp`: a letter changed, added or dropped, or
/// two neighbouring letters swapped (the optimal string alignment distance is 1).
fn one_edit_from_ddp(word: &str) -> bool {
    let a: Vec<char> = word.to_ascii_lowercase().chars().collect();
    let b: Vec<char> = DDP.chars().collect();
    if a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()] == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defects(body: &str) -> Vec<Defect> {
        match classify(body, true) {
            Comment::Lookalike(l) => l.defects,
            other => panic!("{body:?} is {other:?}"),
        }
    }

    #[test]
    fn accepts_the_mark_and_other_annotations() {
        for body in [" @ddp ", "@ddp", "\t@ddp\n"] {
            assert_eq!(classify(body, true), Comment::Annotation("ddp".into()));
        }
        assert_eq!(
            classify(" @deprecated ", true),
            Comment::Annotation("deprecated".into())
        );
    }

    #[test]
    fn rejects_marks_written_off_form_and_says_how() {
        assert_eq!(defects(" @DDP "), [Defect::Case]);
        assert_eq!(defects(" @Ddp "), [Defect::Case]);
        assert_eq!(defects(" @ ddp "), [Defect::Space]);
        assert_eq!(defects("* @ddp "), [Defect::Decorated]);
        assert_eq!(defects("/ @ddp"), [Defect::Decorated]);
        assert_eq!(defects(" @ddp **"), [Defect::Decorated]);
        assert_eq!(defects(" @ddp: the payload "), [Defect::Text]);
        assert_eq!(
            defects("\n * @ddp\n * the data\n "),
            [Defect::Decorated, Defect::Text]
        );
        assert_eq!(
            defects("* @ DDP, bulk "),
            [Defect::Case, Defect::Space, Defect::Decorated, Defect::Text]
        );
    }

    #[test]
    fn rejects_misspelled_marks() {
        for word in [
            "dpd", "dp", "dd", "ddpp", "dddp", "dpp", "DPD", "udp", "xdp",
        ] {
            assert_eq!(
                defects(&format!(" @{word} ")),
                [Defect::Misspelled],
                "{word}"
            );
        }
        assert_eq!(defects(" @ dpd "), [Defect::Misspelled, Defect::Space]);
    }

    #[test]
    fn the_lookalike_points_at_the_at_sign_and_the_word() {
        let body = " * @ DDP: the payload ";
        let Comment::Lookalike(l) = classify(body, true) else {
            panic!()
        };
        assert_eq!(&body[l.at.clone()], "@ DDP");
        assert_eq!(l.written, "@ DDP");
        let Comment::Lookalike(l) = classify(" @dpd ", false) else {
            panic!()
        };
        assert_eq!(l.written, "@dpd");
        assert_eq!(l.at, 1..5);
        assert!(!l.is_mark());
    }

    #[test]
    fn ordinary_comments_with_an_at_sign_stay_ordinary() {
        for body in [
            " mail nfs@example.org ",
            " see @ddp below ",
            " @(#)mount.x\t2.1 88/08/01 4.0 RPCSRC ",
            " @param len the length ",
            "* @return the handle ",
            " @udp: the port ",
            " @ ",
            "@",
            " @id ",
            " @tmp ",
            " @dev ",
        ] {
            assert!(
                matches!(
                    classify(body, true),
                    Comment::Plain | Comment::Annotation(_)
                ),
                "{body:?}"
            );
        }
        assert_eq!(classify(" @param len ", true), Comment::Plain);
    }
}
