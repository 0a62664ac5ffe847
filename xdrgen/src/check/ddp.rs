//! DDP-eligibility marks: which items an Upper Layer Binding lets move as RDMA chunks.
//!
//! Marks come from `/* @ddp */` annotations in the `.x` file and from outside it (binding
//! files, `--ddp`, [`crate::Config::ddp`]); an external mark becomes the same annotation on the
//! field it names, so code generation reads one thing. Rules (seed 004):
//! * section 4.4.3.1: only counted arrays, opaque data and strings move (their count stays
//!   inline), and optional data of those (section 4.4.3.2: the "is present" flag stays);
//! * section 4.4.3.2: "A union data type should never be made DDP-eligible, but one or more
//!   of its arms may be DDP-eligible."

use crate::ast::{Annotation, Loc};
use crate::diag::{did_you_mean, Diagnostic, Diagnostics};
use crate::ir::{Field, ItemKind, Model, Payload, Repr};

/// The annotation name that marks a declaration DDP-eligible.
pub const DDP: &str = "ddp";

/// A mark given outside the annotated XDR.
#[derive(Debug, Clone)]
pub struct ExternalMark {
    /// The struct or union, by XDR name.
    pub type_name: String,
    /// The member: a struct field or the declaration of a union arm.
    pub member: String,
    /// Where the mark is written (a binding file, or the `--ddp` pseudo-file).
    pub loc: Loc,
}

/// Attaches external marks, then checks every mark. Errors go to `diags`.
pub fn apply_marks(model: &mut Model, external: &[ExternalMark], diags: &mut Diagnostics) {
    for mark in external {
        attach(model, mark, diags);
    }
    let shapes = model.clone();
    for item in &mut model.items {
        let container = item.xdr_name.clone();
        for field in fields_mut(&mut item.kind) {
            check_field(&shapes, &container, field, diags);
        }
    }
}

/// Every field of a struct or of a union's arms.
fn fields_mut(kind: &mut ItemKind) -> Vec<&mut Field> {
    match kind {
        ItemKind::Struct { fields, .. } => fields.iter_mut().collect(),
        ItemKind::Union(u) => u
            .arms
            .iter_mut()
            .chain(u.default.iter_mut())
            .flat_map(|arm| match &mut arm.payload {
                Payload::Void => Vec::new(),
                Payload::One(f) => vec![f],
                Payload::Many(fs) => fs.iter_mut().collect(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn fields(kind: &ItemKind) -> Vec<&Field> {
    match kind {
        ItemKind::Struct { fields, .. } => fields.iter().collect(),
        ItemKind::Union(u) => u
            .arms
            .iter()
            .chain(u.default.iter())
            .flat_map(|arm| match &arm.payload {
                Payload::Void => Vec::new(),
                Payload::One(f) => vec![f],
                Payload::Many(fs) => fs.iter().collect(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn attach(model: &mut Model, mark: &ExternalMark, diags: &mut Diagnostics) {
    let containers = || {
        model
            .items
            .iter()
            .filter(|i| matches!(i.kind, ItemKind::Struct { .. } | ItemKind::Union(_)))
            .map(|i| i.xdr_name.as_str())
    };
    let Some(index) = model
        .items
        .iter()
        .position(|i| i.xdr_name == mark.type_name)
    else {
        let mut d = Diagnostic::error(format!("no struct or union named `{}`", mark.type_name))
            .at(&mark.loc, "DDP mark for an undefined type");
        if let Some(s) = did_you_mean(&mark.type_name, containers()) {
            d = d.help(format!("did you mean `{s}.{}`?", mark.member));
        }
        diags.push(d);
        return;
    };
    let item = &mut model.items[index];
    if !matches!(item.kind, ItemKind::Struct { .. } | ItemKind::Union(_)) {
        diags.push(
            Diagnostic::error(format!(
                "`{}` is not a struct or a union: a DDP mark names a member of one",
                mark.type_name
            ))
            .at(&mark.loc, "marks a type, not a member")
            .also(&item.loc, "defined here")
            .help("mark the opaque, string or array field that holds the bulk data"),
        );
        return;
    }
    let names: Vec<String> = fields(&item.kind).iter().map(|f| f.name.clone()).collect();
    let item_loc = item.loc.clone();
    match fields_mut(&mut item.kind)
        .into_iter()
        .find(|f| f.name == mark.member)
    {
        Some(field) => {
            if !field.annotations.iter().any(|a| a.name == DDP) {
                field.annotations.push(Annotation {
                    name: DDP.into(),
                    loc: mark.loc.clone(),
                });
            }
        }
        None => {
            let mut d = Diagnostic::error(format!(
                "`{}` has no member named `{}`",
                mark.type_name, mark.member
            ))
            .at(&mark.loc, "unknown member")
            .also(&item_loc, "defined here");
            if let Some(s) = did_you_mean(&mark.member, names.iter().map(String::as_str)) {
                d = d.help(format!("did you mean `{}.{s}`?", mark.type_name));
            } else if !names.is_empty() {
                d = d.note(format!("its members are: {}", names.join(", ")));
            }
            diags.push(d);
        }
    }
}

/// Why a declaration cannot move as a chunk.
enum Refusal {
    Scalar(String),
    Union(String),
    Aggregate(String),
    List,
}

/// Whether a declaration of shape `repr` can move as a chunk.
fn eligibility(model: &Model, repr: &Repr, depth: usize) -> Result<(), Refusal> {
    match repr {
        Repr::FixedOpaque(_)
        | Repr::VarOpaque(_)
        | Repr::Str(_)
        | Repr::FixedArray(..)
        | Repr::VarArray(..) => Ok(()),
        Repr::Optional(inner) | Repr::Boxed(inner) => match eligibility(model, inner, depth + 1) {
            Err(Refusal::Union(u)) => Err(Refusal::Union(u)),
            other => other,
        },
        Repr::List(_) | Repr::NonEmptyList(_) => Err(Refusal::List),
        Repr::Prim(p) => Err(Refusal::Scalar(super::names::prim_xdr(*p).to_string())),
        Repr::Named(n) => match model.get(n).map(|i| &i.kind) {
            // typedef chains are short; the bound only guards against a malformed model
            Some(ItemKind::Typedef { repr, .. }) if depth < 32 => {
                eligibility(model, repr, depth + 1)
            }
            Some(ItemKind::Union(_)) => Err(Refusal::Union(n.clone())),
            Some(ItemKind::Enum { .. }) => Err(Refusal::Scalar(format!("enum {n}"))),
            _ => Err(Refusal::Aggregate(n.clone())),
        },
    }
}

fn check_field(model: &Model, container: &str, field: &mut Field, diags: &mut Diagnostics) {
    let mut keep = Vec::new();
    for a in std::mem::take(&mut field.annotations) {
        if a.name != DDP {
            // A name close to `ddp` never gets here: the lexer reports it as a lookalike
            // (`parse::marks`).
            diags.push(
                Diagnostic::warning(format!("unknown annotation `@{}`", a.name))
                    .at(&a.loc, "ignored")
                    .note("the only annotation xdrgen reads is the DDP mark, `/* @ddp */`"),
            );
            continue;
        }
        match eligibility(model, &field.repr, 0) {
            Ok(()) => keep.push(a),
            Err(why) => diags.push(refusal(model, container, field, &a, why)),
        }
    }
    field.annotations = keep;
}

fn refusal(
    model: &Model,
    container: &str,
    field: &Field,
    mark: &Annotation,
    why: Refusal,
) -> Diagnostic {
    let what = format!("`{container}.{}`", field.name);
    let d = match why {
        Refusal::Union(u) => Diagnostic::error(format!(
            "{what} is a union (`{u}`), and a union is never DDP-eligible"
        ))
        .note("seed 004 section 4.4.3.2: \"A union data type should never be made DDP-eligible, but one or more of its arms may be DDP-eligible.\"")
        .help(suggest(model, &u).map_or_else(
            || format!("mark an opaque, string or array declaration inside an arm of `{u}`"),
            |s| format!("mark the bulk data inside an arm instead, e.g. `{s}`"),
        )),
        Refusal::Scalar(t) => Diagnostic::error(format!(
            "{what} is a scalar ({t}); only opaque data, strings and arrays can move as chunks"
        ))
        .note("seed 004 section 4.4.3.1: a chunk moves the elements of a counted array or the bytes of opaque data"),
        Refusal::Aggregate(t) => Diagnostic::error(format!(
            "{what} is a struct (`{t}`); only opaque data, strings and arrays can move as chunks"
        ))
        .help(suggest(model, &t).map_or_else(
            || "mark an opaque, string or array field instead".to_string(),
            |s| format!("mark the bulk data inside it instead, e.g. `{s}`"),
        )),
        Refusal::List => Diagnostic::error(format!(
            "{what} is a self-referential list, which has no count to leave inline"
        ))
        .help("use a counted array (`T x<>`) for data that may move as a chunk"),
    };
    d.at(&mark.loc, "DDP mark here")
        .also(&field.loc, "declared here")
}

/// An eligible member of `type_name` (or of the types its members name), as `Type.member`.
fn suggest(model: &Model, type_name: &str) -> Option<String> {
    let mut queue = vec![type_name.to_string()];
    let mut seen = Vec::new();
    while let Some(t) = queue.pop() {
        if seen.contains(&t) || seen.len() > 64 {
            continue;
        }
        seen.push(t.clone());
        let item = model.get(&t)?;
        for f in fields(&item.kind) {
            if eligibility(model, &f.repr, 0).is_ok() {
                return Some(format!("{t}.{}", f.name));
            }
            if let Repr::Named(n) = &f.repr {
                queue.insert(0, n.clone());
            }
        }
    }
    None
}
