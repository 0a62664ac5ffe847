//! Helpers shared by the tests: readers for the two forms of the DDP binding and for the
//! annotated hex vectors. They are deliberately small line-based readers for the files in this
//! repository, not a general XDR parser (that is `xdrgen`'s job).

#![allow(dead_code)] // each test file uses a subset

use std::path::PathBuf;

/// A DDP mark: `(struct name, field name)`.
pub type Mark = (String, String);

/// Reads a binding file: one `Type.field` a line, `#` comments, blank lines ignored.
pub fn parse_binding(text: &str) -> Result<Vec<Mark>, String> {
    let mut marks = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let lineno = index + 1;
        let (ty, field) = line
            .split_once('.')
            .ok_or_else(|| format!("line {lineno}: expected `Type.field`, found `{line}`"))?;
        for part in [ty, field] {
            if !is_identifier(part) {
                return Err(format!("line {lineno}: `{part}` is not an XDR identifier"));
            }
        }
        let mark = (ty.to_string(), field.to_string());
        if marks.contains(&mark) {
            return Err(format!("line {lineno}: duplicate mark `{line}`"));
        }
        marks.push(mark);
    }
    Ok(marks)
}

/// Finds the `/* @ddp */` marks in a `.x` text: each must sit on its own line inside a struct
/// body and mark the next declaration (ordinary comments may precede the mark, only blank lines
/// may follow it).
pub fn marks_in_spec(text: &str) -> Result<Vec<Mark>, String> {
    let mut marks = Vec::new();
    let mut current_struct: Option<String> = None;
    let mut pending: Option<usize> = None;
    for (index, raw) in text.lines().enumerate() {
        let lineno = index + 1;
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("struct ") {
            if line.ends_with('{') {
                let name = rest.trim_end_matches('{').trim();
                current_struct = Some(name.to_string());
            }
            continue;
        }
        if line.starts_with('}') {
            if let Some(at) = pending {
                return Err(format!("line {at}: @ddp mark before the end of a body"));
            }
            current_struct = None;
            continue;
        }
        if is_ddp_mark(line) {
            if current_struct.is_none() {
                return Err(format!("line {lineno}: @ddp mark outside a struct body"));
            }
            pending = Some(lineno);
            continue;
        }
        if line.is_empty() {
            continue;
        }
        if let Some(at) = pending.take() {
            let field = declared_name(line)
                .ok_or_else(|| format!("line {at}: @ddp mark not followed by a declaration"))?;
            let ty = current_struct.clone().unwrap_or_default();
            marks.push((ty, field));
        }
    }
    match pending {
        Some(at) => Err(format!("line {at}: @ddp mark at the end of the file")),
        None => Ok(marks),
    }
}

/// Returns the type name of `Struct.field` as declared in `text` (e.g. `opaque`, `nfspath3`),
/// and whether the declaration is variable-length (`<...>`).
pub fn field_type(text: &str, ty: &str, field: &str) -> Option<(String, bool)> {
    let mut inside = false;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("struct ") {
            inside = rest.trim_end_matches('{').trim() == ty && line.ends_with('{');
            continue;
        }
        if line.starts_with('}') {
            inside = false;
            continue;
        }
        if inside && !line.starts_with("/*") && declared_name(line).as_deref() == Some(field) {
            let type_name = line.split_whitespace().next()?.to_string();
            return Some((type_name, line.contains('<')));
        }
    }
    None
}

/// Returns the right-hand side of `typedef <rhs> name...;` for `name`, e.g. `string`.
pub fn typedef_base(text: &str, name: &str) -> Option<(String, bool)> {
    text.lines().find_map(|raw| {
        let line = raw.trim().strip_prefix("typedef ")?;
        (declared_name(line).as_deref() == Some(name)).then(|| {
            (
                line.split_whitespace().next().unwrap_or("").to_string(),
                line.contains('<'),
            )
        })
    })
}

fn is_ddp_mark(line: &str) -> bool {
    line.strip_prefix("/*")
        .and_then(|l| l.strip_suffix("*/"))
        .is_some_and(|inner| inner.trim() == "@ddp")
}

/// The declared identifier of a declaration line: `opaque data<>;` -> `data`,
/// `entry3 *nextentry;` -> `nextentry`, `cookieverf3 cookieverf;` -> `cookieverf`.
fn declared_name(line: &str) -> Option<String> {
    let decl = line.split(';').next()?;
    let decl = decl.split(['<', '[']).next()?;
    let name = decl.split_whitespace().last()?.trim_start_matches('*');
    is_identifier(name).then(|| name.to_string())
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One line of an annotated vector: its bytes and whether it is marked `[DDP]`.
#[derive(Debug)]
pub struct VectorLine {
    /// 1-based line number in the file.
    pub lineno: usize,
    /// The bytes written on the line.
    pub bytes: Vec<u8>,
    /// The line's comment contains `[DDP]`.
    pub ddp: bool,
}

/// Reads an annotated vector: hex digits (whitespace ignored), `#` comments.
pub fn parse_vector(text: &str) -> Result<Vec<VectorLine>, String> {
    let mut lines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let lineno = index + 1;
        let (data, comment) = raw.split_once('#').unwrap_or((raw, ""));
        let digits: String = data.chars().filter(|c| !c.is_whitespace()).collect();
        if digits.is_empty() {
            continue;
        }
        if digits.len() % 2 != 0 {
            return Err(format!("line {lineno}: odd number of hex digits"));
        }
        let bytes = (0..digits.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&digits[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|e| format!("line {lineno}: {e}"))?;
        lines.push(VectorLine {
            lineno,
            bytes,
            ddp: comment.contains("[DDP]"),
        });
    }
    Ok(lines)
}

/// The concatenated bytes of a parsed vector.
pub fn vector_bytes(lines: &[VectorLine]) -> Vec<u8> {
    lines.iter().flat_map(|l| l.bytes.iter().copied()).collect()
}

/// `tests/vectors/` of this crate.
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("vectors")
}

/// Names of the annotated vectors (`tests/vectors/NAME.hex`), sorted.
pub fn vector_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(vectors_dir())
        .expect("tests/vectors is readable")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".hex").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Reads and parses `tests/vectors/<dir>/<name>.hex` (`dir` empty for the hand vectors).
pub fn load_vector(dir: &str, name: &str) -> Vec<VectorLine> {
    let path = vectors_dir().join(dir).join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_vector(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
