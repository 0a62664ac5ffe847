//! The small part of the C preprocessor that rpcgen input relies on.
//!
//! rpcgen runs `cpp` over its input. The `.x` files in the wild use `#ifdef`/`#if`/`#else`/
//! `#endif` to pick alternatives, `#include "other.x"` to share definitions, and `%` lines to
//! pass C code through to the output. This module blanks every such line (and every line in a
//! branch not taken) with spaces, so byte offsets of the remaining text stay those of the file.
//! No macro is defined (as rpcgen would for `RPC_HDR`, `RPC_XDR`, ...), so `#ifdef X` branches
//! are not taken and `#else` branches are, unless `X` is given with `--define`
//! ([`preprocess_with_defines`]).

use crate::ast::{FileId, Loc};

/// The outcome of preprocessing one file.
#[derive(Debug, Default)]
pub struct Preprocessed {
    /// The text with directive, pass-through and skipped lines blanked.
    pub text: String,
    /// `#include "path"` directives, with the location of the directive.
    pub includes: Vec<(String, Loc)>,
    /// The number of `%` pass-through lines dropped.
    pub passthrough_lines: usize,
    /// The first of them.
    pub first_passthrough: Option<Loc>,
    /// `%#define NAME VALUE` pass-through lines: (name, value text, location of the line).
    /// rpcgen copies them into C headers; some `.x` files use them as bounds.
    pub c_defines: Vec<(String, String, Loc)>,
    /// Problems worth a diagnostic: (location, message).
    pub problems: Vec<(Loc, String)>,
}

struct Cond {
    /// Whether lines in the current branch are kept.
    active: bool,
    /// Whether any branch of this conditional was taken already.
    taken: bool,
    /// Whether the enclosing region is active.
    parent: bool,
}

/// Preprocesses `text` of file `file`.
pub fn preprocess(file: FileId, text: &str) -> Preprocessed {
    preprocess_with_defines(file, text, &[])
}

/// Preprocesses `text` of file `file` with the macros `predefined` already defined (as
/// `cpp -D` does), for `#ifdef` and `#if`.
pub fn preprocess_with_defines(file: FileId, text: &str, predefined: &[String]) -> Preprocessed {
    let mut out = Preprocessed {
        text: String::with_capacity(text.len()),
        ..Default::default()
    };
    let mut defines: Vec<String> = predefined.to_vec();
    let mut stack: Vec<Cond> = Vec::new();
    let mut offset = 0;
    let mut in_comment = false;
    for line in text.split_inclusive('\n') {
        let active = stack.last().is_none_or_active();
        let trimmed = line.trim_start();
        let loc = Loc {
            file,
            span: offset..offset + line.trim_end().len(),
        };
        // A `#` or `%` only starts a directive outside a block comment.
        let directive = !in_comment && trimmed.starts_with('#');
        let passthrough = !in_comment && trimmed.starts_with('%');
        if directive {
            let body = trimmed[1..].trim();
            let (word, rest) = body
                .split_once(|c: char| c.is_whitespace())
                .map_or((body, ""), |(w, r)| (w, r.trim()));
            match word {
                "ifdef" | "ifndef" => {
                    let defined = defines.iter().any(|d| d == first_word(rest));
                    let cond = (word == "ifdef") == defined;
                    stack.push(Cond {
                        active: active && cond,
                        taken: cond,
                        parent: active,
                    });
                }
                "if" => {
                    let cond = eval_if(rest, &defines);
                    stack.push(Cond {
                        active: active && cond,
                        taken: cond,
                        parent: active,
                    });
                }
                "elif" => {
                    if let Some(top) = stack.last_mut() {
                        let cond = !top.taken && eval_if(rest, &defines);
                        top.active = top.parent && cond;
                        top.taken |= cond;
                    } else {
                        out.problems
                            .push((loc.clone(), "`#elif` without `#if`".into()));
                    }
                }
                "else" => {
                    if let Some(top) = stack.last_mut() {
                        top.active = top.parent && !top.taken;
                        top.taken = true;
                    } else {
                        out.problems
                            .push((loc.clone(), "`#else` without `#if`".into()));
                    }
                }
                "endif" if stack.pop().is_none() => {
                    out.problems
                        .push((loc.clone(), "`#endif` without `#if`".into()));
                }
                "define" if active => defines.push(first_word(rest).to_string()),
                "undef" if active => {
                    let name = first_word(rest);
                    defines.retain(|d| d != name);
                }
                "include" if active => {
                    let path = rest.trim_matches(|c| c == '"' || c == '<' || c == '>');
                    out.includes.push((path.to_string(), loc.clone()));
                }
                _ => {}
            }
            blank(&mut out.text, line);
        } else if passthrough {
            if active {
                out.passthrough_lines += 1;
                out.first_passthrough.get_or_insert_with(|| loc.clone());
            }
            // Collected in every branch: rpcgen emits `#ifdef RPC_HDR` blocks into the C
            // header, and these are only used for names the input leaves undefined.
            let body = trimmed[1..].trim_start();
            if let Some(rest) = body.strip_prefix("#define") {
                let rest = rest.trim();
                let name = first_word(rest);
                let after = &rest[name.len()..];
                let value = after.split("/*").next().unwrap_or("").trim();
                if !name.is_empty() && !value.is_empty() && !after.starts_with('(') {
                    out.c_defines
                        .push((name.to_string(), value.to_string(), loc.clone()));
                }
            }
            blank(&mut out.text, line);
        } else if !active {
            blank(&mut out.text, line);
        } else {
            in_comment = track_comment(line, in_comment);
            out.text.push_str(line);
        }
        offset += line.len();
    }
    if !stack.is_empty() {
        out.problems.push((
            Loc {
                file,
                span: text.len()..text.len(),
            },
            "unterminated `#if`/`#ifdef` at end of file".into(),
        ));
    }
    out
}

trait ActiveExt {
    fn is_none_or_active(&self) -> bool;
}

impl ActiveExt for Option<&Cond> {
    fn is_none_or_active(&self) -> bool {
        match self {
            None => true,
            Some(c) => c.active,
        }
    }
}

fn first_word(s: &str) -> &str {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("")
}

/// `#if` with a number, a name (true only if defined and not `0`), `defined(X)`, or `!` of those.
fn eval_if(expr: &str, defines: &[String]) -> bool {
    let expr = expr.split("/*").next().unwrap_or("").trim();
    if let Some(rest) = expr.strip_prefix('!') {
        return !eval_if(rest, defines);
    }
    if let Some(rest) = expr.strip_prefix("defined") {
        let name = rest
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .trim();
        return defines.iter().any(|d| d == name);
    }
    if let Ok(n) = expr.parse::<i64>() {
        return n != 0;
    }
    defines.iter().any(|d| d == first_word(expr))
}

fn blank(out: &mut String, line: &str) {
    for c in line.chars() {
        if c == '\n' {
            out.push('\n');
        } else {
            // Keep byte offsets: one space per byte.
            for _ in 0..c.len_utf8() {
                out.push(' ');
            }
        }
    }
}

/// Whether a block comment is still open at the end of `line`.
fn track_comment(line: &str, mut in_comment: bool) -> bool {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if in_comment {
            if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                in_comment = false;
                i += 2;
                continue;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            in_comment = true;
            i += 2;
            continue;
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            break;
        }
        i += 1;
    }
    in_comment
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_offsets_and_takes_else() {
        let src = "#ifdef X\nint a;\n#else\nint b;\n#endif\n%pass\n";
        let p = preprocess(FileId(0), src);
        assert_eq!(p.text.len(), src.len());
        assert!(!p.text.contains("int a"));
        assert!(p.text.contains("int b"));
        assert_eq!(p.passthrough_lines, 1);
    }

    #[test]
    fn predefined_macros_take_ifdef_branches() {
        let src = "#ifdef X\nint a;\n#else\nint b;\n#endif\n";
        let p = preprocess_with_defines(FileId(0), src, &["X".to_string()]);
        assert!(p.text.contains("int a"));
        assert!(!p.text.contains("int b"));
    }

    #[test]
    fn include() {
        let p = preprocess(FileId(0), "#include \"other.x\"\n");
        assert_eq!(p.includes[0].0, "other.x");
    }
}
