//! The hint "pass the other file too": when the types a file uses and lacks are defined in
//! other `.x` files of its directory that were not passed (the v2 draft's `baseops.x`
//! needs its `common.x`), a note names those files and the command that includes them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::ast::{Definition, FileId, Ident};
use crate::diag::{Diagnostic, Diagnostics, Severity, Sources};
use crate::ir::Unresolved;
use crate::parse;

/// At most this many sibling files are read per directory.
const MAX_SIBLINGS: usize = 64;

/// Sibling files larger than this are not read.
const MAX_SIBLING_BYTES: u64 = 1 << 20;

/// One note per input file whose unresolved type names (`unresolved`, first uses) are all
/// defined in `.x` files of the same directory that are not among `loaded` (canonical paths
/// of the files read). Names lenient mode would read (`uint32`) need not be defined there,
/// but are listed when they are.
pub(crate) fn hints(
    unresolved: &[Unresolved],
    sources: &Sources,
    loaded: &[PathBuf],
) -> Vec<Diagnostic> {
    let mut by_file: BTreeMap<FileId, Vec<&Unresolved>> = BTreeMap::new();
    for u in unresolved {
        by_file.entry(u.name.loc.file).or_default().push(u);
    }
    let mut dirs: HashMap<PathBuf, Vec<(PathBuf, BTreeSet<String>)>> = HashMap::new();
    let mut notes = Vec::new();
    for (file, names) in by_file {
        let path = Path::new(sources.name(file));
        let Some(dir) = path.parent() else { continue };
        let siblings = dirs
            .entry(dir.to_path_buf())
            .or_insert_with(|| defined_in_siblings(dir, loaded));
        if let Some((files, covered)) = cover(&names, siblings) {
            notes.push(note(path, &covered, &files));
        }
    }
    notes
}

/// The `.x` files of `dir` not among `loaded`, in name order, each with the type names it
/// defines at the top level.
fn defined_in_siblings(dir: &Path, loaded: &[PathBuf]) -> Vec<(PathBuf, BTreeSet<String>)> {
    let read_dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(read_dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.metadata()
                .is_ok_and(|m| m.is_file() && m.len() <= MAX_SIBLING_BYTES)
        })
        .map(|e| dir.join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|x| x == "x"))
        .filter(|p| !loaded.contains(&p.canonicalize().unwrap_or_else(|_| p.clone())))
        .collect();
    paths.sort();
    paths.truncate(MAX_SIBLINGS);
    paths
        .into_iter()
        .filter_map(|p| {
            let bytes = std::fs::read(&p).ok()?;
            let text = String::from_utf8_lossy(&bytes);
            // Lenient, and its diagnostics dropped: only the names matter here.
            let mut scratch = Diagnostics::default();
            let parsed = parse::parse_file(FileId(0), &text, true, &mut scratch);
            let names = parsed
                .spec
                .definitions
                .iter()
                .filter_map(|(def, _)| match def {
                    Definition::Typedef(d) => Some(d.name.name.clone()),
                    Definition::Enum(n, _) | Definition::Struct(n, _) | Definition::Union(n, _) => {
                        Some(n.name.clone())
                    }
                    Definition::Const { .. } | Definition::Program(_) => None,
                })
                .collect();
            Some((p, names))
        })
        .collect()
}

/// Siblings that together define every name lenient mode would not read (or, when all
/// could be read, every name), each adding at least one (taken in name order), and the
/// names those siblings define; `None` when a needed name is defined in none of them.
fn cover<'n>(
    names: &[&'n Unresolved],
    siblings: &[(PathBuf, BTreeSet<String>)],
) -> Option<(Vec<PathBuf>, Vec<&'n Ident>)> {
    let needed: Vec<&str> = if names.iter().any(|n| !n.lenient_reads_it) {
        names
            .iter()
            .filter(|n| !n.lenient_reads_it)
            .map(|n| n.name.name.as_str())
            .collect()
    } else {
        names.iter().map(|n| n.name.name.as_str()).collect()
    };
    let mut missing: BTreeSet<&str> = needed.into_iter().collect();
    let mut files: Vec<(PathBuf, &BTreeSet<String>)> = Vec::new();
    for (path, defined) in siblings {
        let before = missing.len();
        missing.retain(|n| !defined.contains(*n));
        if missing.len() < before {
            files.push((path.clone(), defined));
        }
    }
    if !missing.is_empty() || files.is_empty() {
        return None;
    }
    let listed: Vec<&Ident> = names
        .iter()
        .filter(|n| files.iter().any(|(_, d)| d.contains(&n.name.name)))
        .map(|n| &n.name)
        .collect();
    Some((files.into_iter().map(|(p, _)| p).collect(), listed))
}

fn note(input: &Path, names: &[&Ident], files: &[PathBuf]) -> Diagnostic {
    let shown = |p: &Path| format!("`{}`", p.display());
    let listed: Vec<String> = files.iter().map(|f| shown(f)).collect();
    let types: Vec<String> = names.iter().map(|n| format!("`{}`", n.name)).collect();
    let command: Vec<String> = files
        .iter()
        .map(|f| f.display().to_string())
        .chain(std::iter::once(input.display().to_string()))
        .collect();
    Diagnostic::new(
        Severity::Note,
        format!(
            "{} needs {} from {}, which {} not passed",
            shown(input),
            types.join(", "),
            listed.join(" and "),
            if files.len() == 1 { "was" } else { "were" }
        ),
    )
    .at(&names[0].loc, format!("defined in {}", listed.join(" and ")))
    .help(format!(
        "pass the files together, as one namespace: `xdrgen check {}` (in build.rs, list them all in `compile`)",
        command.join(" ")
    ))
}
