//! Whole-model decisions: linked lists, recursion (boxing, infinite size), derivable traits
//! and minimum encoded lengths.

use std::collections::{HashMap, HashSet};

use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{ItemKind, Model, Payload, Prim, Repr};

/// Runs every whole-model pass.
pub fn finish(model: &mut Model, diags: &mut Diagnostics) {
    report_rust_name_clashes(model, diags);
    let lists = find_lists(model);
    apply_lists(model, &lists);
    let reach = Reach::new(model);
    report_infinite(model, &reach, diags);
    box_recursion(model, &reach);
    for item in &mut model.items {
        if let ItemKind::Typedef { repr, newtype } = &mut item.kind {
            *newtype = !repr.is_natural();
        }
        item.props.recursive = reach.reaches(&item.xdr_name, &item.xdr_name, false);
    }
    derive_props(model);
}

/// Two XDR names that become the same Rust name (`foo_bar` and `fooBar` -> `FooBar`).
fn report_rust_name_clashes(model: &Model, diags: &mut Diagnostics) {
    use crate::rust::ident::{const_name, type_name_str};
    let mut seen: HashMap<String, &crate::ir::Item> = HashMap::new();
    for item in &model.items {
        let rust = match &item.kind {
            ItemKind::Const { .. } | ItemKind::StrConst { .. } => {
                format!("const {}", const_name(&item.xdr_name))
            }
            ItemKind::Program(_) => {
                format!("mod {}", crate::rust::ident::field_name(&item.xdr_name))
            }
            _ => format!("type {}", type_name_str(&item.xdr_name)),
        };
        if let Some(prev) = seen.get(&rust) {
            if prev.xdr_name == item.xdr_name {
                // Already reported as a duplicate definition.
                continue;
            }
            diags.push(
                Diagnostic::error(format!(
                    "`{}` and `{}` both become the Rust {rust}",
                    prev.xdr_name, item.xdr_name
                ))
                .at(&item.loc, "clashes in Rust")
                .also(&prev.loc, "with this definition")
                .help("rename one of them"),
            );
        } else {
            seen.insert(rust, item);
        }
    }
}

/// Follows typedefs that alias another name (`typedef a b;`) to the final name.
fn resolve_named<'m>(model: &'m Model, mut name: &'m str) -> &'m str {
    for _ in 0..64 {
        match model.get(name).map(|i| &i.kind) {
            Some(ItemKind::Typedef {
                repr: Repr::Named(n),
                ..
            }) if n != name => name = n,
            _ => break,
        }
    }
    name
}

/// The shape a name stands for after following alias typedefs.
fn alias_repr<'m>(model: &'m Model, name: &'m str) -> Option<&'m Repr> {
    match &model.get(resolve_named(model, name))?.kind {
        ItemKind::Typedef { repr, .. } => Some(repr),
        _ => None,
    }
}

/// Structs `L` whose last field is `L *next` (directly or through `typedef L *P; P next;`):
/// RPC-over-RDMA's chunk lists (RFC 8166 section 4.3), rpcgen's `mountlist`, ... Their
/// elements become `Vec<L>` items, encoded iteratively by `encode_list`/`decode_list`.
fn find_lists(model: &Model) -> HashSet<String> {
    let mut used_in_procs = HashSet::new();
    for item in &model.items {
        if let ItemKind::Program(p) = &item.kind {
            for v in &p.versions {
                for pr in &v.procedures {
                    for r in pr.args.iter().chain(pr.result.iter()) {
                        if let Repr::Named(n) = r {
                            used_in_procs.insert(resolve_named(model, n).to_string());
                        }
                    }
                }
            }
        }
    }
    let mut lists = HashSet::new();
    for item in &model.items {
        let ItemKind::Struct { fields, .. } = &item.kind else {
            continue;
        };
        if fields.len() < 2 || used_in_procs.contains(&item.xdr_name) {
            continue;
        }
        let last = &fields[fields.len() - 1].repr;
        let target = match last {
            Repr::Optional(e) => match &**e {
                Repr::Named(n) => Some(n.as_str()),
                _ => None,
            },
            Repr::Named(t) => match alias_repr(model, t) {
                Some(Repr::Optional(e)) => match &**e {
                    Repr::Named(n) => Some(n.as_str()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        if target.is_some_and(|t| resolve_named(model, t) == item.xdr_name) {
            lists.insert(item.xdr_name.clone());
        }
    }
    lists
}

fn transform(model: &Model, lists: &HashSet<String>, r: &Repr) -> Repr {
    match r {
        Repr::Named(n) => {
            let t = resolve_named(model, n);
            if lists.contains(t) {
                Repr::NonEmptyList(t.to_string())
            } else {
                r.clone()
            }
        }
        Repr::Optional(e) => {
            if let Repr::Named(n) = &**e {
                let t = resolve_named(model, n);
                if lists.contains(t) {
                    return Repr::List(t.to_string());
                }
            }
            Repr::Optional(Box::new(transform(model, lists, e)))
        }
        Repr::FixedArray(e, n) => Repr::FixedArray(Box::new(transform(model, lists, e)), n.clone()),
        Repr::VarArray(e, n) => Repr::VarArray(Box::new(transform(model, lists, e)), n.clone()),
        other => other.clone(),
    }
}

fn apply_lists(model: &mut Model, lists: &HashSet<String>) {
    if lists.is_empty() {
        return;
    }
    let snapshot = model.clone();
    for item in &mut model.items {
        let is_list = lists.contains(&item.xdr_name);
        match &mut item.kind {
            ItemKind::Struct { fields, list_next } => {
                if is_list {
                    if let Some(next) = fields.pop() {
                        *list_next = Some(next.name);
                    }
                }
                for f in fields {
                    f.repr = transform(&snapshot, lists, &f.repr);
                }
            }
            ItemKind::Union(u) => {
                for arm in u.arms.iter_mut().chain(u.default.iter_mut()) {
                    match &mut arm.payload {
                        Payload::One(f) => f.repr = transform(&snapshot, lists, &f.repr),
                        Payload::Many(fs) => {
                            for f in fs {
                                f.repr = transform(&snapshot, lists, &f.repr);
                            }
                        }
                        Payload::Void => {}
                    }
                }
            }
            ItemKind::Typedef { repr, .. }
                // `typedef L alias;` stays an alias of the element type.
                if !matches!(repr, Repr::Named(_)) => {
                    *repr = transform(&snapshot, lists, repr);
                }
            _ => {}
        }
    }
}

/// Every shape an item holds.
fn reprs(kind: &ItemKind) -> Vec<&Repr> {
    match kind {
        ItemKind::Struct { fields, .. } => fields.iter().map(|f| &f.repr).collect(),
        ItemKind::Union(u) => u
            .arms
            .iter()
            .chain(u.default.iter())
            .flat_map(|a| match &a.payload {
                Payload::Void => Vec::new(),
                Payload::One(f) => vec![&f.repr],
                Payload::Many(fs) => fs.iter().map(|f| &f.repr).collect(),
            })
            .collect(),
        ItemKind::Typedef { repr, .. } => vec![repr],
        _ => Vec::new(),
    }
}

/// Names a shape refers to, with whether the reference is direct (stored inline).
fn refs(r: &Repr, indirect: bool, out: &mut Vec<(String, bool)>) {
    match r {
        Repr::Named(n) => out.push((n.clone(), !indirect)),
        Repr::FixedArray(e, _) => refs(e, indirect, out),
        Repr::VarArray(e, _) | Repr::Optional(e) | Repr::Boxed(e) => refs(e, true, out),
        Repr::List(n) | Repr::NonEmptyList(n) => out.push((n.clone(), false)),
        _ => {}
    }
}

/// Reachability between type items, over all references and over direct ones only.
struct Reach {
    all: HashMap<String, HashSet<String>>,
    direct: HashMap<String, HashSet<String>>,
}

impl Reach {
    fn new(model: &Model) -> Reach {
        let mut edges: HashMap<&str, Vec<(String, bool)>> = HashMap::new();
        for item in &model.items {
            let mut out = Vec::new();
            for r in reprs(&item.kind) {
                refs(r, false, &mut out);
            }
            edges.insert(&item.xdr_name, out);
        }
        let closure = |direct_only: bool| {
            let mut res = HashMap::new();
            for start in edges.keys() {
                let mut seen: HashSet<String> = HashSet::new();
                let mut stack: Vec<&str> = vec![start];
                while let Some(n) = stack.pop() {
                    for (m, direct) in edges.get(n).into_iter().flatten() {
                        if (!direct_only || *direct) && seen.insert(m.clone()) {
                            stack.push(m);
                        }
                    }
                }
                res.insert(start.to_string(), seen);
            }
            res
        };
        Reach {
            all: closure(false),
            direct: closure(true),
        }
    }

    fn reaches(&self, from: &str, to: &str, direct: bool) -> bool {
        let map = if direct { &self.direct } else { &self.all };
        map.get(from).is_some_and(|s| s.contains(to))
    }
}

/// Item indices in an order where, outside cycles, every item comes after the items it
/// refers to (a depth-first post-order, iterative), so that the fixpoints below settle in
/// one or two passes over acyclic models.
fn dependency_order(model: &Model) -> Vec<usize> {
    let index: HashMap<&str, usize> = model
        .items
        .iter()
        .enumerate()
        .map(|(i, item)| (item.xdr_name.as_str(), i))
        .collect();
    let deps: Vec<Vec<usize>> = model
        .items
        .iter()
        .map(|item| {
            let mut out = Vec::new();
            for r in reprs(&item.kind) {
                refs(r, false, &mut out);
            }
            out.iter()
                .filter_map(|(n, _)| index.get(n.as_str()).copied())
                .collect()
        })
        .collect();
    let mut order = Vec::with_capacity(model.items.len());
    let mut visited = vec![false; model.items.len()];
    for root in 0..model.items.len() {
        if visited[root] {
            continue;
        }
        visited[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some((node, next)) = stack.last_mut() {
            if let Some(&dep) = deps[*node].get(*next) {
                *next += 1;
                if !visited[dep] {
                    visited[dep] = true;
                    stack.push((dep, 0));
                }
            } else {
                order.push(*node);
                stack.pop();
            }
        }
    }
    order
}

/// The type items that have a value of finite size: a least fixpoint, starting from none.
/// A struct needs every field finite, a union one arm (a `void` arm is), a fixed array its
/// element; optional data and variable-length arrays may be empty, so they always are. A
/// type left out cannot be encoded at all: every value would contain itself.
fn finite_types(model: &Model) -> HashSet<String> {
    fn repr_finite(model: &Model, r: &Repr, finite: &HashSet<String>) -> bool {
        match r {
            Repr::Prim(_)
            | Repr::FixedOpaque(_)
            | Repr::VarOpaque(_)
            | Repr::Str(_)
            | Repr::VarArray(..)
            | Repr::Optional(_)
            | Repr::List(_) => true,
            // An unknown name is reported elsewhere; it does not make this type infinite.
            Repr::Named(n) | Repr::NonEmptyList(n) => model.get(n).is_none() || finite.contains(n),
            Repr::FixedArray(e, _) | Repr::Boxed(e) => repr_finite(model, e, finite),
        }
    }
    let payload_finite = |p: &Payload, finite: &HashSet<String>| match p {
        Payload::Void => true,
        Payload::One(f) => repr_finite(model, &f.repr, finite),
        Payload::Many(fs) => fs.iter().all(|f| repr_finite(model, &f.repr, finite)),
    };
    let order = dependency_order(model);
    let mut finite = HashSet::new();
    loop {
        let mut changed = false;
        for item in order.iter().map(|&i| &model.items[i]) {
            if finite.contains(&item.xdr_name) {
                continue;
            }
            let now = match &item.kind {
                ItemKind::Struct { fields, .. } => {
                    fields.iter().all(|f| repr_finite(model, &f.repr, &finite))
                }
                ItemKind::Union(u) => u
                    .arms
                    .iter()
                    .chain(u.default.iter())
                    .any(|a| payload_finite(&a.payload, &finite)),
                ItemKind::Typedef { repr, .. } => repr_finite(model, repr, &finite),
                _ => true,
            };
            if now {
                finite.insert(item.xdr_name.clone());
                changed = true;
            }
        }
        if !changed {
            return finite;
        }
    }
}

/// RFC 4506 section 4.19: a type whose every value contains itself has no finite encoding.
/// Recursion through a union arm with a way out (a `void` arm, another arm), optional data
/// or a variable-length array is finite and accepted. One error per cycle; a type that only
/// contains an infinite one is not reported again.
fn report_infinite(model: &Model, reach: &Reach, diags: &mut Diagnostics) {
    let finite = finite_types(model);
    let mut reported: Vec<&str> = Vec::new();
    for item in &model.items {
        let n = item.xdr_name.as_str();
        if finite.contains(n)
            || !reach.reaches(n, n, false)
            || reported
                .iter()
                .any(|r| reach.reaches(r, n, false) && reach.reaches(n, r, false))
        {
            continue;
        }
        reported.push(n);
        let union_on_the_way = model.items.iter().any(|u| {
            matches!(u.kind, ItemKind::Union(_))
                && (u.xdr_name == n
                    || (reach.reaches(n, &u.xdr_name, false)
                        && reach.reaches(&u.xdr_name, n, false)))
        });
        let (way_out, arm_note) = if union_on_the_way {
            (
                "a `void` arm in the union on the way, or ",
                "; a new `void` arm leaves the encoding of the other arms as it is",
            )
        } else {
            ("", "")
        };
        diags.push(
            Diagnostic::error(format!("type `{n}` contains itself: its size would be infinite"))
                .at(&item.loc, "every value contains another one")
                .help(format!(
                    "give the recursion a way out: {way_out}make the reference optional (`{n} *next;`) or a variable-length array (`{n} items<>;`)"
                ))
                .note(format!("an optional or an array changes the wire format (a 4-byte presence flag or count goes before the value){arm_note}"))
                .note("RFC 4506 section 4.19: recursive data goes through optional data"),
        );
    }
}

/// A union arm's shape with each reference that leads back to the union `me` without
/// indirection boxed (`Box<T>`), so that the Rust enum has a finite size; through fixed
/// arrays too (`[Box<T>; N]`). Optional data and vectors are indirect already.
fn box_back_references(r: &Repr, me: &str, reach: &Reach) -> Repr {
    match r {
        Repr::Named(t) if t == me || reach.reaches(t, me, true) => Repr::Boxed(Box::new(r.clone())),
        Repr::FixedArray(e, n) => {
            Repr::FixedArray(Box::new(box_back_references(e, me, reach)), n.clone())
        }
        other => other.clone(),
    }
}

fn box_recursion(model: &mut Model, reach: &Reach) {
    for item in &mut model.items {
        let me = item.xdr_name.clone();
        let fix = |r: &mut Repr| {
            if let Repr::Optional(e) = r {
                if let Repr::Named(t) = &**e {
                    if reach.reaches(t, &me, false) {
                        *r = Repr::Optional(Box::new(Repr::Boxed(e.clone())));
                    }
                }
            }
        };
        match &mut item.kind {
            ItemKind::Struct { fields, .. } => fields.iter_mut().for_each(|f| fix(&mut f.repr)),
            ItemKind::Union(u) => {
                let fix_arm = |r: &mut Repr| {
                    fix(r);
                    *r = box_back_references(r, &me, reach);
                };
                for arm in u.arms.iter_mut().chain(u.default.iter_mut()) {
                    match &mut arm.payload {
                        Payload::One(f) => fix_arm(&mut f.repr),
                        Payload::Many(fs) => fs.iter_mut().for_each(|f| fix_arm(&mut f.repr)),
                        Payload::Void => {}
                    }
                }
            }
            ItemKind::Typedef { repr, .. } => fix(repr),
            _ => {}
        }
    }
}

fn prim_props(p: Prim) -> (bool, bool, usize) {
    match p {
        Prim::Float => (true, false, 4),
        Prim::Double => (true, false, 8),
        Prim::Hyper | Prim::UHyper => (true, true, 8),
        Prim::Int | Prim::UInt | Prim::Bool => (true, true, 4),
    }
}

/// (copy, eq) of a shape given the current guesses for named types.
fn repr_traits(r: &Repr, known: &HashMap<String, (bool, bool)>) -> (bool, bool) {
    match r {
        Repr::Prim(p) => {
            let (c, e, _) = prim_props(*p);
            (c, e)
        }
        Repr::Named(n) => known.get(n).copied().unwrap_or((false, false)),
        Repr::FixedOpaque(_) | Repr::VarOpaque(_) | Repr::Str(_) => (false, true),
        Repr::FixedArray(e, n) if n.value > crate::ir::MAX_INLINE_ARRAY => {
            (false, repr_traits(e, known).1)
        }
        Repr::FixedArray(e, _) | Repr::Optional(e) => repr_traits(e, known),
        Repr::VarArray(e, _) | Repr::Boxed(e) => (false, repr_traits(e, known).1),
        Repr::List(n) | Repr::NonEmptyList(n) => {
            (false, known.get(n).copied().unwrap_or((false, false)).1)
        }
    }
}

/// The fewest bytes a shape takes on the wire, given the current bounds for named types
/// (`mins`; a name without an item, reported elsewhere, counts 4).
fn repr_min(model: &Model, r: &Repr, mins: &HashMap<String, usize>) -> usize {
    let named = |n: &str| match model.get(n) {
        Some(_) => mins.get(n).copied().unwrap_or(usize::MAX),
        None => 4,
    };
    match r {
        Repr::Prim(p) => prim_props(*p).2,
        Repr::Named(n) => named(n),
        Repr::FixedOpaque(s) => {
            let n = s.value as usize;
            n.saturating_add(crate::rust::padding(n))
        }
        Repr::VarOpaque(_) | Repr::Str(_) | Repr::VarArray(..) | Repr::Optional(_) => 4,
        Repr::List(_) => 4,
        Repr::NonEmptyList(n) => named(n).saturating_add(4),
        Repr::Boxed(e) => repr_min(model, e, mins),
        Repr::FixedArray(e, s) => repr_min(model, e, mins).saturating_mul(s.value as usize),
    }
}

/// The fewest bytes each item takes on the wire. A fixpoint from "unbounded" down, so that
/// recursion through union arms (finite, but cyclic) needs no depth cut-off: a cycle never
/// gives a minimum, and an item still unbounded at the end (an infinite type, an error
/// already) counts 4.
fn min_lens(model: &Model) -> HashMap<String, usize> {
    let order = dependency_order(model);
    let mut mins: HashMap<String, usize> = HashMap::new();
    for _ in 0..=model.items.len() {
        let mut changed = false;
        for item in order.iter().map(|&i| &model.items[i]) {
            let v = match &item.kind {
                ItemKind::Struct { fields, .. } => fields.iter().fold(0usize, |a, f| {
                    a.saturating_add(repr_min(model, &f.repr, &mins))
                }),
                ItemKind::Union(u) => {
                    let arm_min = u
                        .arms
                        .iter()
                        .chain(u.default.iter())
                        .map(|a| match &a.payload {
                            Payload::Void => 0,
                            Payload::One(f) => repr_min(model, &f.repr, &mins),
                            Payload::Many(fs) => fs.iter().fold(0usize, |acc, f| {
                                acc.saturating_add(repr_min(model, &f.repr, &mins))
                            }),
                        })
                        .min()
                        .unwrap_or(0);
                    4usize.saturating_add(arm_min)
                }
                ItemKind::Typedef { repr, .. } => repr_min(model, repr, &mins),
                _ => 4,
            };
            if mins.get(&item.xdr_name).map_or(true, |&old| v < old) {
                mins.insert(item.xdr_name.clone(), v);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for v in mins.values_mut() {
        if *v == usize::MAX {
            *v = 4;
        }
    }
    mins
}

fn derive_props(model: &mut Model) {
    let mut known: HashMap<String, (bool, bool)> = model
        .items
        .iter()
        .map(|i| (i.xdr_name.clone(), (true, true)))
        .collect();
    // Greatest fixpoint: start from "everything derivable" and withdraw until stable.
    for _ in 0..=model.items.len() {
        let mut changed = false;
        for item in &model.items {
            let new = match &item.kind {
                ItemKind::Enum { .. } => (true, true),
                kind => reprs(kind).into_iter().fold((true, true), |acc, r| {
                    let t = repr_traits(r, &known);
                    (acc.0 && t.0, acc.1 && t.1)
                }),
            };
            if known.get(&item.xdr_name) != Some(&new) {
                known.insert(item.xdr_name.clone(), new);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mins = min_lens(model);
    for item in &mut model.items {
        let (copy, eq) = known.get(&item.xdr_name).copied().unwrap_or((false, false));
        item.props.copy = copy;
        item.props.eq = eq;
        item.props.min_len = mins.get(&item.xdr_name).copied().unwrap_or(4);
    }
}
