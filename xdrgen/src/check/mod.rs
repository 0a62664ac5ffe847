//! Checking: names, constants, types, recursion and linked lists, from the parsed files (one
//! namespace, later files may use earlier definitions and vice versa) to the [`Model`].
//!
//! One function per rule; every problem becomes a diagnostic and checking goes on, so a user
//! sees all of them at once. Quirks of the old drafts are repaired the same way in both modes
//! (so one defect does not cascade) but are errors unless lenient mode is on.

mod graph;
mod names;

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::ast::{self, DeclKind, Definition, Ident, Loc, TypeKind, Value};
use crate::diag::{did_you_mean, Diagnostic, Diagnostics, Sources};
use crate::ir::{self, Disc, Field, Item, ItemKind, Label, Payload, Prim, Props, Repr, Size};

pub use names::{builtin_type, LENIENT_ALIASES};

/// The display name of the built-in prelude file.
pub const PRELUDE_FILE: &str = "rpcgen-prelude.x";

/// The longest chain of constants defined through each other (bounds recursion).
const MAX_CONST_CHAIN: usize = 256;

/// A definition after anonymous types were hoisted out.
#[derive(Debug, Clone)]
pub(crate) struct Def {
    pub name: Ident,
    pub kind: DefKind,
    pub loc: Loc,
}

#[derive(Debug, Clone)]
pub(crate) enum DefKind {
    Typedef(ast::Decl),
    Enum(ast::EnumBody),
    Struct(ast::StructBody),
    Union(ast::UnionBody),
    Const { ty: Option<ast::Type>, value: Value },
    Program(ast::Program),
}

#[derive(Debug, Clone, Copy)]
enum ValueSym {
    Const(usize),
    Member(usize, usize),
    Builtin(i128),
}

/// How an unknown type name is resolved in lenient mode.
#[derive(Debug, Clone)]
enum Rename {
    Prim(Prim),
    Type(String),
}

/// The checker's state.
pub struct Checker<'a> {
    sources: &'a Sources,
    lenient: bool,
    diags: &'a mut Diagnostics,
    pub(crate) defs: Vec<Def>,
    types: HashMap<String, usize>,
    values: HashMap<String, ValueSym>,
    renames: HashMap<String, Option<Rename>>,
    /// Constant name -> types it is used at.
    const_uses: HashMap<String, Vec<(Prim, &'static str)>>,
    evaluating: HashSet<String>,
}

/// Checks parsed files and builds the model.
pub fn check(
    specs: &[ast::Specification],
    prelude: &ast::Specification,
    sources: &Sources,
    lenient: bool,
    diags: &mut Diagnostics,
) -> ir::Model {
    let mut c = Checker {
        sources,
        lenient,
        diags,
        defs: Vec::new(),
        types: HashMap::new(),
        values: HashMap::new(),
        renames: HashMap::new(),
        const_uses: HashMap::new(),
        evaluating: HashSet::new(),
    };
    for spec in specs {
        for (def, loc) in &spec.definitions {
            c.hoist(def.clone(), loc.clone());
        }
    }
    c.drop_self_typedefs();
    c.add_prelude(prelude);
    c.fix_reversed_typedefs();
    c.build_symbols();
    c.resolve_unknown_types();
    c.build_model()
}

impl Checker<'_> {
    // ---- hoisting ---------------------------------------------------------------------------

    /// Adds a definition, first hoisting inline `struct {..}`/`enum {..}`/`union switch ..`
    /// type specifiers out as named definitions `PARENT_FIELD`.
    fn hoist(&mut self, def: Definition, loc: Loc) {
        let (name, kind) = match def {
            Definition::Typedef(mut d) => {
                let n = d.name.name.clone();
                self.hoist_decl(&n, &mut d);
                (d.name.clone(), DefKind::Typedef(d))
            }
            Definition::Enum(n, b) => (n, DefKind::Enum(b)),
            Definition::Struct(n, mut b) => {
                for f in &mut b.fields {
                    self.hoist_decl(&n.name, f);
                }
                (n, DefKind::Struct(b))
            }
            Definition::Union(n, mut b) => {
                self.hoist_union(&n.name, &mut b);
                (n, DefKind::Union(b))
            }
            Definition::Const { name, ty, value } => (name, DefKind::Const { ty, value }),
            Definition::Program(mut p) => {
                for v in &mut p.versions {
                    for pr in &mut v.procedures {
                        let base = pr.name.name.to_ascii_lowercase();
                        if let Some(r) = &mut pr.result {
                            self.hoist_type(&format!("{base}_result"), r);
                        }
                        for (i, a) in pr.args.iter_mut().enumerate() {
                            self.hoist_type(&format!("{base}_arg{}", i + 1), a);
                        }
                    }
                }
                (p.name.clone(), DefKind::Program(p))
            }
        };
        self.defs.push(Def { name, kind, loc });
    }

    fn hoist_union(&mut self, parent: &str, b: &mut ast::UnionBody) {
        let dn = b
            .disc_name
            .as_ref()
            .map_or("discriminant".to_string(), |d| d.name.clone());
        self.hoist_type(&format!("{parent}_{dn}"), &mut b.disc_type);
        for arm in b.arms.iter_mut().chain(b.default.iter_mut()) {
            for d in &mut arm.decls {
                self.hoist_decl(parent, d);
            }
        }
    }

    fn hoist_decl(&mut self, parent: &str, d: &mut ast::Decl) {
        let name = format!("{parent}_{}", d.name.name);
        match &mut d.kind {
            DeclKind::Plain(t)
            | DeclKind::FixedArray(t, _)
            | DeclKind::VarArray(t, _)
            | DeclKind::Optional(t) => self.hoist_type(&name, t),
            _ => {}
        }
    }

    fn hoist_type(&mut self, name: &str, t: &mut ast::Type) {
        let kind = std::mem::replace(&mut t.kind, TypeKind::Int);
        let ident = Ident {
            name: name.to_string(),
            loc: t.loc.clone(),
        };
        let def_kind = match kind {
            TypeKind::Struct(mut b) => {
                for f in &mut b.fields {
                    self.hoist_decl(name, f);
                }
                DefKind::Struct(b)
            }
            TypeKind::Enum(b) => DefKind::Enum(b),
            TypeKind::Union(mut b) => {
                self.hoist_union(name, &mut b);
                DefKind::Union(*b)
            }
            other => {
                t.kind = other;
                return;
            }
        };
        self.defs.push(Def {
            name: ident.clone(),
            kind: def_kind,
            loc: t.loc.clone(),
        });
        t.kind = TypeKind::Named(ident);
    }

    /// `typedef struct X X;` (a C habit, nis.x): the struct is already a type.
    fn drop_self_typedefs(&mut self) {
        self.defs.retain(|d| match &d.kind {
            DefKind::Typedef(ast::Decl {
                kind:
                    DeclKind::Plain(ast::Type {
                        kind: TypeKind::Named(t),
                        ..
                    }),
                name,
                ..
            }) => t.name != name.name,
            _ => true,
        });
    }

    /// Adds fallback definitions (rpcgen's library types `netobj` and `des_block`, the C
    /// header constant `MAXNETNAMELEN`, constants from `%#define` lines) that the input uses
    /// but does not define. Repeats until nothing changes, as a fallback may use another.
    fn add_prelude(&mut self, prelude: &ast::Specification) {
        loop {
            let types: HashSet<String> =
                self.type_refs().into_iter().map(|(n, _)| n.name).collect();
            let values = self.value_refs();
            let mut added = false;
            for (def, loc) in &prelude.definitions {
                let (name, used) = match def {
                    Definition::Typedef(d) => (&d.name, types.contains(&d.name.name)),
                    Definition::Const { name, .. } => (name, values.contains(&name.name)),
                    _ => continue,
                };
                if used && !self.defs.iter().any(|d| d.name.name == name.name) {
                    if self.sources.name(loc.file) != PRELUDE_FILE {
                        self.diags.push(
                            Diagnostic::new(
                                crate::diag::Severity::Note,
                                format!("constant `{}` taken from a `%#define` line", name.name),
                            )
                            .at(
                                loc,
                                "rpcgen copies this line into C; xdrgen reads its value",
                            ),
                        );
                    }
                    self.hoist(def.clone(), loc.clone());
                    added = true;
                }
            }
            if !added {
                break;
            }
        }
    }

    /// Every constant name used in a value position.
    fn value_refs(&self) -> HashSet<String> {
        let mut out = HashSet::new();
        let mut val = |v: &Value| match v {
            Value::Name(n) | Value::Offset { base: n, .. } => {
                out.insert(n.name.clone());
            }
            _ => {}
        };
        fn decl_values<'d>(d: &'d ast::Decl, f: &mut dyn FnMut(&'d Value)) {
            match &d.kind {
                DeclKind::FixedArray(_, v) | DeclKind::FixedOpaque(v) => f(v),
                DeclKind::VarArray(_, Some(v))
                | DeclKind::VarOpaque(Some(v))
                | DeclKind::String(Some(v)) => f(v),
                _ => {}
            }
        }
        for d in &self.defs {
            match &d.kind {
                DefKind::Typedef(x) => decl_values(x, &mut val),
                DefKind::Struct(b) => b.fields.iter().for_each(|f| decl_values(f, &mut val)),
                DefKind::Union(b) => {
                    for a in b.arms.iter().chain(b.default.iter()) {
                        a.labels.iter().for_each(&mut val);
                        a.decls.iter().for_each(|f| decl_values(f, &mut val));
                    }
                }
                DefKind::Enum(b) => b
                    .members
                    .iter()
                    .filter_map(|m| m.value.as_ref())
                    .for_each(&mut val),
                DefKind::Const { value, .. } => val(value),
                DefKind::Program(p) => {
                    val(&p.number);
                    for v in &p.versions {
                        val(&v.number);
                        v.procedures.iter().for_each(|pr| val(&pr.number));
                    }
                }
            }
        }
        out
    }

    // ---- symbols ------------------------------------------------------------------------

    fn is_type_name(&self, name: &str) -> bool {
        self.defs.iter().any(|d| {
            d.name.name == name
                && matches!(
                    d.kind,
                    DefKind::Typedef(_) | DefKind::Enum(_) | DefKind::Struct(_) | DefKind::Union(_)
                )
        }) || builtin_type(name, true).is_some()
    }

    /// `typedef rpcrdma2_propid uint32;` (draft-cel-nfsv4-rpcrdma-version-two-09 section 6.3):
    /// the declared name is a known type and the aliased one is not.
    fn fix_reversed_typedefs(&mut self) {
        for i in 0..self.defs.len() {
            let DefKind::Typedef(d) = &self.defs[i].kind else {
                continue;
            };
            let DeclKind::Plain(ast::Type {
                kind: TypeKind::Named(target),
                ..
            }) = &d.kind
            else {
                continue;
            };
            if self.is_type_name(&target.name) || !self.is_type_name(&d.name.name) {
                continue;
            }
            let (new_name, new_target) = (target.clone(), d.name.clone());
            let loc = self.defs[i].loc.clone();
            self.diags.push(
                Diagnostic::quirk(
                    self.lenient,
                    format!(
                        "typedef names the known type `{}` after the unknown `{}`: the operands look reversed",
                        new_target.name, new_name.name
                    ),
                )
                .at(&loc, "reversed typedef")
                .help(format!(
                    "write `typedef {} {};` (RFC 4506 section 4.18: `typedef declaration;`)",
                    new_target.name, new_name.name
                ))
                .note("lenient mode swaps the two names"),
            );
            let decl = ast::Decl {
                name: new_name.clone(),
                kind: DeclKind::Plain(ast::Type {
                    kind: TypeKind::Named(new_target.clone()),
                    loc: new_target.loc.clone(),
                }),
                annotations: Vec::new(),
                loc: d.loc.clone(),
            };
            self.defs[i].name = new_name;
            self.defs[i].kind = DefKind::Typedef(decl);
        }
    }

    fn build_symbols(&mut self) {
        self.values.insert("TRUE".into(), ValueSym::Builtin(1));
        self.values.insert("FALSE".into(), ValueSym::Builtin(0));
        let mut first_type: HashMap<String, Loc> = HashMap::new();
        let mut first_value: HashMap<String, Loc> = HashMap::new();
        for (i, d) in self.defs.iter().enumerate() {
            let mut values: Vec<(Ident, ValueSym)> = Vec::new();
            let is_type = match &d.kind {
                DefKind::Typedef(_) | DefKind::Struct(_) | DefKind::Union(_) => true,
                DefKind::Enum(b) => {
                    for (j, m) in b.members.iter().enumerate() {
                        values.push((m.name.clone(), ValueSym::Member(i, j)));
                    }
                    true
                }
                DefKind::Const { .. } => {
                    values.push((d.name.clone(), ValueSym::Const(i)));
                    false
                }
                DefKind::Program(_) => false,
            };
            if is_type {
                if let Some(prev) = first_type.get(&d.name.name) {
                    self.diags.push(
                        Diagnostic::error(format!("type `{}` is defined twice", d.name.name))
                            .at(&d.name.loc, "redefined here")
                            .also(prev, "first defined here")
                            .help("rename or remove one of the definitions"),
                    );
                } else {
                    first_type.insert(d.name.name.clone(), d.name.loc.clone());
                    self.types.insert(d.name.name.clone(), i);
                }
            }
            for (name, sym) in values {
                if let Some(prev) = first_value.get(&name.name) {
                    self.diags.push(
                        Diagnostic::error(format!("constant `{}` is defined twice", name.name))
                            .at(&name.loc, "redefined here")
                            .also(prev, "first defined here")
                            .help("rename or remove one of the definitions"),
                    );
                } else {
                    first_value.insert(name.name.clone(), name.loc.clone());
                    self.values.insert(name.name.clone(), sym);
                }
            }
        }
    }

    // ---- unknown type names -----------------------------------------------------------------

    /// Every type reference: (name, location, use). Uses: "disc", "const", "field:<name>", "proc".
    fn type_refs(&self) -> Vec<(Ident, String)> {
        self.type_refs_in()
            .into_iter()
            .map(|(i, h, _)| (i, h))
            .collect()
    }

    /// Every type reference: (name, use, containing definition).
    fn type_refs_in(&self) -> Vec<(Ident, String, String)> {
        let mut all = Vec::new();
        for d in &self.defs {
            let mut out = Vec::new();
            Self::refs_of(d, &mut out);
            all.extend(out.into_iter().map(|(i, h)| (i, h, d.name.name.clone())));
        }
        all
    }

    fn refs_of(d: &Def, out: &mut Vec<(Ident, String)>) {
        fn ty(t: &ast::Type, how: &str, out: &mut Vec<(Ident, String)>) {
            if let TypeKind::Named(n) = &t.kind {
                out.push((n.clone(), how.to_string()));
            }
        }
        fn decl(d: &ast::Decl, out: &mut Vec<(Ident, String)>) {
            let how = format!("field:{}", d.name.name);
            match &d.kind {
                DeclKind::Plain(t)
                | DeclKind::FixedArray(t, _)
                | DeclKind::VarArray(t, _)
                | DeclKind::Optional(t) => ty(t, &how, out),
                _ => {}
            }
        }
        match &d.kind {
            DefKind::Typedef(x) => decl(x, out),
            DefKind::Struct(b) => b.fields.iter().for_each(|f| decl(f, out)),
            DefKind::Union(b) => {
                ty(&b.disc_type, "disc", out);
                for a in b.arms.iter().chain(b.default.iter()) {
                    a.decls.iter().for_each(|f| decl(f, out));
                }
            }
            DefKind::Const { ty: Some(t), .. } => ty(t, "const", out),
            DefKind::Program(p) => {
                for v in &p.versions {
                    for pr in &v.procedures {
                        pr.result.iter().for_each(|t| ty(t, "proc", out));
                        pr.args.iter().for_each(|t| ty(t, "proc", out));
                    }
                }
            }
            _ => {}
        }
    }

    /// Reports every unknown type name once, with a suggestion, and decides what lenient mode
    /// makes of it.
    fn resolve_unknown_types(&mut self) {
        let refs = self.type_refs_in();
        let referenced: HashSet<&str> = refs.iter().map(|(n, _, _)| n.name.as_str()).collect();
        let mut unknown: BTreeMap<String, Vec<(Ident, String, String)>> = BTreeMap::new();
        for (n, how, container) in &refs {
            if self.types.contains_key(&n.name) || builtin_type(&n.name, false).is_some() {
                continue;
            }
            unknown.entry(n.name.clone()).or_default().push((
                n.clone(),
                how.clone(),
                container.clone(),
            ));
        }
        // Types defined but never used: candidates for "named differently where used".
        let unused: Vec<String> = self
            .defs
            .iter()
            .filter(|d| {
                matches!(
                    d.kind,
                    DefKind::Struct(_) | DefKind::Union(_) | DefKind::Enum(_) | DefKind::Typedef(_)
                ) && !referenced.contains(d.name.name.as_str())
            })
            .map(|d| d.name.name.clone())
            .collect();
        for (name, uses) in unknown {
            let first = &uses[0].0;
            let (rename, diag) = self.explain_unknown(&name, first, &uses, &unused);
            self.diags.push(diag);
            self.renames.insert(name, rename);
        }
    }

    fn explain_unknown(
        &self,
        name: &str,
        first: &Ident,
        uses: &[(Ident, String, String)],
        unused: &[String],
    ) -> (Option<Rename>, Diagnostic) {
        let n_uses = uses.len();
        let more = if n_uses > 1 {
            format!(" (and {} more use(s))", n_uses - 1)
        } else {
            String::new()
        };
        // uint32, uint64, int32, int64: the drafts use them without a typedef.
        if let Some(p) = builtin_type(name, true) {
            let spelled = names::prim_xdr(p);
            let d = Diagnostic::quirk(self.lenient, format!("unknown type `{name}`"))
                .at(&first.loc, format!("not defined{more}"))
                .help(format!(
                    "add `typedef {spelled} {name};` or write `{spelled}`"
                ))
                .note(format!("lenient mode treats `{name}` as `{spelled}`"));
            return (Some(Rename::Prim(p)), d);
        }
        // A union or struct named differently where it is used (rfc5666bis-01 section 5.6:
        // `rpcrdma1_body rdma_body;` with `union rdma_body`).
        // Candidates: unused definitions other than the ones holding the uses, of a kind that
        // fits the uses, picked by the first rule that leaves exactly one: the declaration's
        // field has the candidate's name; same last `_` segment; a small edit distance.
        let last = |s: &str| s.rsplit('_').next().unwrap_or(s).to_string();
        let int_only = uses
            .iter()
            .all(|(_, how, _)| how == "disc" || how == "const");
        let pool: Vec<&String> = unused
            .iter()
            .filter(|u| !uses.iter().any(|(_, _, c)| c == *u))
            .filter(|u| {
                !int_only
                    || matches!(
                        self.defs[self.types[u.as_str()]].kind,
                        DefKind::Enum(_) | DefKind::Typedef(_)
                    )
            })
            .collect();
        let rules: [&dyn Fn(&str) -> bool; 3] = [
            &|u| {
                uses.iter()
                    .any(|(_, how, _)| how.strip_prefix("field:") == Some(u))
            },
            &|u| last(u) == last(name) && u.contains('_') && name.contains('_'),
            &|u| crate::diag::edit_distance(u, name) <= name.len() / 3,
        ];
        let candidates: Vec<&String> = rules
            .iter()
            .map(|rule| pool.iter().copied().filter(|u| rule(u)).collect::<Vec<_>>())
            .find(|c| !c.is_empty())
            .unwrap_or_default();
        if candidates.len() == 1 {
            let cand = candidates[0].clone();
            let cloc = self.defs[self.types[&cand]].name.loc.clone();
            let d = Diagnostic::quirk(self.lenient, format!("unknown type `{name}`"))
                .at(&first.loc, format!("not defined{more}"))
                .also(&cloc, format!("`{cand}` is defined here and never used"))
                .help(format!("did you mean `{cand}`? rename one of the two"))
                .note(format!("lenient mode reads `{name}` as `{cand}`"));
            return (Some(Rename::Type(cand)), d);
        }
        // Used only as a discriminant or a constant's type: an integer type in all but name.
        if int_only {
            let d = Diagnostic::quirk(self.lenient, format!("unknown type `{name}`"))
                .at(&first.loc, format!("not defined{more}"))
                .help(format!(
                    "define it, e.g. `typedef unsigned int {name};`, or use `unsigned int`"
                ))
                .note(format!(
                    "lenient mode treats `{name}` as `unsigned int`: it is only used as a union discriminant or a constant's type"
                ));
            return (Some(Rename::Prim(Prim::UInt)), d);
        }
        let all_names = self
            .types
            .keys()
            .map(String::as_str)
            .chain(names::BUILTIN_NAMES.iter().copied());
        let mut d = Diagnostic::error(format!("unknown type `{name}`"))
            .at(&first.loc, format!("not defined{more}"));
        if let Some(s) = did_you_mean(name, all_names) {
            d = d.help(format!("did you mean `{s}`?"));
        } else {
            d = d.help(format!(
                "define `{name}` (struct, union, enum or typedef) in one of the input files"
            ));
        }
        (None, d)
    }

    // ---- values -------------------------------------------------------------------------

    /// Evaluates a value; reports unknown names.
    fn eval(&mut self, v: &Value, use_as: Option<(Prim, &'static str)>) -> Option<i128> {
        match v {
            Value::Lit { value, .. } => Some(*value),
            Value::Offset { base, delta, .. } => {
                let b = self.eval(&Value::Name(base.clone()), None)?;
                Some(b + delta)
            }
            Value::Str { loc, .. } => {
                self.diags.push(
                    Diagnostic::error("expected an integer, found a string literal")
                        .at(loc, "not an integer"),
                );
                None
            }
            Value::Name(id) => {
                let Some(sym) = self.values.get(&id.name).copied() else {
                    let cands: Vec<String> = self.values.keys().cloned().collect();
                    let mut d = Diagnostic::error(format!("unknown constant `{}`", id.name))
                        .at(&id.loc, "not defined");
                    if let Some(s) = did_you_mean(&id.name, cands.iter().map(String::as_str)) {
                        d = d.help(format!("did you mean `{s}`?"));
                    } else {
                        d = d.help(format!("define it: `const {} = ...;`", id.name));
                    }
                    self.diags.push(d);
                    return None;
                };
                match sym {
                    ValueSym::Builtin(v) => Some(v),
                    ValueSym::Member(i, j) => self.member_value(i, j, &id.name),
                    ValueSym::Const(i) => {
                        if let Some(u) = use_as {
                            self.const_uses.entry(id.name.clone()).or_default().push(u);
                        }
                        let DefKind::Const { value, .. } = &self.defs[i].kind else {
                            return None;
                        };
                        let value = value.clone();
                        self.eval_guarded(&id.name, &value)
                    }
                }
            }
        }
    }

    /// The value of member `j` of enum definition `i`; members without `= value` (rpcgen)
    /// count on from the previous one, starting at 0.
    fn member_value(&mut self, i: usize, j: usize, name: &str) -> Option<i128> {
        let DefKind::Enum(b) = &self.defs[i].kind else {
            return None;
        };
        let explicit = b.members[..=j.min(b.members.len().saturating_sub(1))]
            .iter()
            .rposition(|m| m.value.is_some());
        match explicit {
            Some(k) => {
                let v = b.members[k].value.clone()?;
                Some(self.eval_guarded(name, &v)? + (j - k) as i128)
            }
            None => Some(j as i128),
        }
    }

    fn eval_guarded(&mut self, name: &str, v: &Value) -> Option<i128> {
        if self.evaluating.len() >= MAX_CONST_CHAIN {
            self.diags.push(
                Diagnostic::error(format!(
                    "constant `{name}` is defined through more than {MAX_CONST_CHAIN} other constants"
                ))
                .at(v.loc(), "chain too long"),
            );
            return None;
        }
        if !self.evaluating.insert(name.to_string()) {
            self.diags.push(
                Diagnostic::error(format!("constant `{name}` is defined in terms of itself"))
                    .at(v.loc(), "cycle"),
            );
            return None;
        }
        let r = self.eval(v, None);
        self.evaluating.remove(name);
        r
    }

    fn size(&mut self, v: &Value) -> Option<Size> {
        let value = self.eval(v, Some((Prim::UInt, "a size bound")))?;
        match u32::try_from(value) {
            Ok(value) => Some(Size {
                value,
                name: match v {
                    Value::Name(n)
                        if matches!(self.values.get(&n.name), Some(ValueSym::Const(_))) =>
                    {
                        Some(n.name.clone())
                    }
                    _ => None,
                },
            }),
            Err(_) => {
                self.diags.push(
                    Diagnostic::error(format!(
                        "size {value} is out of range: lengths are 0 to 4294967295"
                    ))
                    .at(v.loc(), "invalid size")
                    .note("RFC 4506 sections 4.10-4.13: lengths are unsigned 32-bit integers"),
                );
                None
            }
        }
    }

    // ---- model ------------------------------------------------------------------------------

    fn build_model(&mut self) -> ir::Model {
        let mut items = Vec::new();
        for i in 0..self.defs.len() {
            let d = self.defs[i].clone();
            if let Some(kind) = self.item_kind(&d) {
                items.push(Item {
                    xdr_name: d.name.name.clone(),
                    origin: self.sources.file_line(&d.name.loc),
                    loc: d.name.loc.clone(),
                    kind,
                    props: Props::default(),
                });
            }
        }
        self.type_consts(&mut items);
        let mut model = ir::Model { items };
        graph::finish(&mut model, self.diags);
        model
    }

    fn item_kind(&mut self, d: &Def) -> Option<ItemKind> {
        Some(match &d.kind {
            DefKind::Const {
                value: Value::Str { text, .. },
                ..
            } => ItemKind::StrConst { text: text.clone() },
            DefKind::Const { ty, value } => {
                let v = self.eval(value, None)?;
                let declared = ty.as_ref().and_then(|t| match &t.kind {
                    TypeKind::Named(n) => {
                        builtin_type(&n.name, true).or_else(|| match self.renames.get(&n.name) {
                            Some(Some(Rename::Prim(p))) => Some(*p),
                            _ => self.alias_prim(&n.name),
                        })
                    }
                    k => prim_of(k),
                });
                ItemKind::Const {
                    value: v,
                    ty: declared.unwrap_or(Prim::Hyper),
                    why: if declared.is_some() {
                        "the type written in the (typed) constant definition".into()
                    } else {
                        String::new()
                    },
                }
            }
            DefKind::Enum(b) => self.enum_item(b),
            DefKind::Struct(b) => {
                let mut fields = Vec::new();
                let mut failed = false;
                let mut seen: HashMap<String, Loc> = HashMap::new();
                for f in &b.fields {
                    if let Some(prev) = seen.get(&f.name.name) {
                        self.diags.push(
                            Diagnostic::error(format!("field `{}` is declared twice", f.name.name))
                                .at(&f.name.loc, "redeclared here")
                                .also(prev, "first declared here"),
                        );
                        continue;
                    }
                    seen.insert(f.name.name.clone(), f.name.loc.clone());
                    match self.field(f) {
                        Some(field) => fields.push(field),
                        None => failed = true,
                    }
                }
                if failed {
                    return None;
                }
                ItemKind::Struct {
                    fields,
                    list_next: None,
                }
            }
            DefKind::Union(b) => ItemKind::Union(self.union_item(b)?),
            DefKind::Typedef(decl) => ItemKind::Typedef {
                repr: self.decl_repr(decl)?,
                newtype: false,
            },
            DefKind::Program(p) => ItemKind::Program(self.program(p)?),
        })
    }

    /// The primitive a typedef chain ends in, if any.
    fn alias_prim(&self, name: &str) -> Option<Prim> {
        let mut name = name.to_string();
        for _ in 0..32 {
            if let Some(p) = builtin_type(&name, self.lenient) {
                return Some(p);
            }
            let i = *self.types.get(&name)?;
            let DefKind::Typedef(d) = &self.defs[i].kind else {
                return None;
            };
            match &d.kind {
                DeclKind::Plain(t) => match &t.kind {
                    TypeKind::Named(n) => name = n.name.clone(),
                    k => return prim_of(k),
                },
                _ => return None,
            }
        }
        None
    }

    fn enum_item(&mut self, b: &ast::EnumBody) -> ItemKind {
        let mut members: Vec<ir::EnumMember> = Vec::new();
        let mut aliases = Vec::new();
        let mut prev: Option<i128> = None;
        for m in &b.members {
            let v = match &m.value {
                Some(val) => self.eval(val, Some((Prim::Int, "an enum value"))),
                None => Some(prev.map_or(0, |p| p + 1)),
            };
            let Some(v) = v else {
                continue;
            };
            prev = Some(v);
            let Ok(v) = i32::try_from(v) else {
                let at = m.value.as_ref().map_or(&m.name.loc, |v| v.loc());
                self.diags.push(
                    Diagnostic::error(format!("enum value {v} does not fit in a signed 32-bit int"))
                        .at(at, "out of range")
                        .note("RFC 4506 section 4.3: enumerations have the same representation as signed integers"),
                );
                continue;
            };
            if let Some(prev) = members.iter().find(|p| p.value == v) {
                self.diags.push(
                    Diagnostic::quirk(
                        self.lenient,
                        format!(
                            "enum value {v} of `{}` repeats the value of `{}`",
                            m.name.name, prev.name
                        ),
                    )
                    .at(&m.name.loc, "duplicate value")
                    .also(&prev.loc, "first used here")
                    .help("give each member a distinct value")
                    .note(format!(
                        "lenient mode makes `{}` an alias of `{}`",
                        m.name.name, prev.name
                    )),
                );
                aliases.push((m.name.name.clone(), prev.name.clone()));
                continue;
            }
            members.push(ir::EnumMember {
                name: m.name.name.clone(),
                value: v,
                loc: m.name.loc.clone(),
            });
        }
        ItemKind::Enum { members, aliases }
    }

    fn field(&mut self, d: &ast::Decl) -> Option<Field> {
        Some(Field {
            name: d.name.name.clone(),
            repr: self.decl_repr(d)?,
            annotations: d.annotations.clone(),
            loc: d.loc.clone(),
        })
    }

    fn decl_repr(&mut self, d: &ast::Decl) -> Option<Repr> {
        Some(match &d.kind {
            DeclKind::Plain(t) => self.base(t)?,
            DeclKind::FixedArray(t, n) => {
                let b = self.base(t);
                let n = self.size(n);
                Repr::FixedArray(Box::new(b?), n?)
            }
            DeclKind::VarArray(t, n) => {
                let b = self.base(t);
                let n = n.as_ref().map(|n| self.size(n));
                Repr::VarArray(Box::new(b?), n.map(|n| n.ok_or(())).transpose().ok()?)
            }
            DeclKind::FixedOpaque(n) => Repr::FixedOpaque(self.size(n)?),
            DeclKind::VarOpaque(n) => match n {
                Some(n) => Repr::VarOpaque(Some(self.size(n)?)),
                None => Repr::VarOpaque(None),
            },
            DeclKind::String(n) => match n {
                Some(n) => Repr::Str(Some(self.size(n)?)),
                None => Repr::Str(None),
            },
            DeclKind::Optional(t) => Repr::Optional(Box::new(self.base(t)?)),
        })
    }

    /// A type specifier as a shape (names resolved; `quadruple` rejected).
    fn base(&mut self, t: &ast::Type) -> Option<Repr> {
        match &t.kind {
            TypeKind::Quadruple => {
                self.diags.push(
                    Diagnostic::error("`quadruple` is not supported")
                        .at(&t.loc, "128-bit float")
                        .help("use `double`, or `opaque x[16]` to carry the raw bits")
                        .note("Rust has no stable 128-bit float type (RFC 4506 section 4.8)"),
                );
                None
            }
            TypeKind::Named(n) => {
                if self.types.contains_key(&n.name) {
                    return Some(Repr::Named(n.name.clone()));
                }
                if let Some(p) = builtin_type(&n.name, false) {
                    return Some(Repr::Prim(p));
                }
                match self.renames.get(&n.name)? {
                    Some(Rename::Prim(p)) => Some(Repr::Prim(*p)),
                    Some(Rename::Type(t)) => Some(Repr::Named(t.clone())),
                    None => None,
                }
            }
            k => prim_of(k).map(Repr::Prim),
        }
    }

    fn disc(&mut self, t: &ast::Type) -> Option<Disc> {
        let r = self.base(t)?;
        let mut r = r;
        for _ in 0..32 {
            match r {
                Repr::Prim(Prim::Int) => return Some(Disc::Int),
                Repr::Prim(Prim::UInt) => return Some(Disc::UInt),
                Repr::Prim(Prim::Bool) => return Some(Disc::Bool),
                Repr::Named(ref n) => {
                    let i = self.types[n];
                    match &self.defs[i].kind {
                        DefKind::Enum(_) => return Some(Disc::Enum(n.clone())),
                        DefKind::Typedef(ast::Decl {
                            kind: DeclKind::Plain(t),
                            ..
                        }) => {
                            let t = t.clone();
                            r = self.base(&t)?;
                        }
                        _ => break,
                    }
                }
                _ => break,
            }
        }
        self.diags.push(
            Diagnostic::error(
                "a union discriminant must be `int`, `unsigned int`, `bool` or an enum",
            )
            .at(&t.loc, "invalid discriminant type")
            .note("RFC 4506 section 4.15"),
        );
        None
    }

    fn union_item(&mut self, b: &ast::UnionBody) -> Option<ir::Union> {
        let disc = self.disc(&b.disc_type);
        let mut failed = false;
        let mut arms = Vec::new();
        let mut seen: Vec<(i64, Loc)> = Vec::new();
        for arm in &b.arms {
            let mut labels = Vec::new();
            for l in &arm.labels {
                if let Some(label) = self.label(l, disc.as_ref()) {
                    if let Some((_, prev)) = seen.iter().find(|(v, _)| *v == label.value) {
                        self.diags.push(
                            Diagnostic::error(format!("case value {} appears twice", label.value))
                                .at(l.loc(), "duplicate case")
                                .also(prev, "first used here")
                                .help("remove one of the case labels"),
                        );
                        continue;
                    }
                    seen.push((label.value, l.loc().clone()));
                    labels.push(label);
                }
            }
            let Some(payload) = self.payload(&arm.decls) else {
                failed = true;
                continue;
            };
            arms.push(ir::UnionArm {
                labels,
                payload,
                loc: arm.loc.clone(),
            });
        }
        let default = match &b.default {
            Some(a) => Some(ir::UnionArm {
                labels: Vec::new(),
                payload: self.payload(&a.decls)?,
                loc: a.loc.clone(),
            }),
            None => None,
        };
        if failed {
            return None;
        }
        Some(ir::Union {
            disc: disc?,
            disc_name: b.disc_name.as_ref().map(|d| d.name.clone()),
            arms,
            default,
        })
    }

    fn payload(&mut self, decls: &[ast::Decl]) -> Option<Payload> {
        Some(match decls {
            [] => Payload::Void,
            [one] => Payload::One(self.field(one)?),
            many => {
                let v: Vec<Option<Field>> = many.iter().map(|d| self.field(d)).collect();
                Payload::Many(v.into_iter().collect::<Option<Vec<_>>>()?)
            }
        })
    }

    /// A case label, checked against the discriminant type (RFC 4506 section 4.15).
    fn label(&mut self, l: &Value, disc: Option<&Disc>) -> Option<Label> {
        let name = match l {
            Value::Name(n) => Some(n.name.clone()),
            Value::Lit { .. } | Value::Str { .. } | Value::Offset { .. } => None,
        };
        let use_as = match disc {
            Some(Disc::Int) => Some((Prim::Int, "a case label of an `int` union")),
            Some(Disc::UInt) => Some((Prim::UInt, "a case label of an `unsigned int` union")),
            _ => None,
        };
        let value = self.eval(l, use_as)?;
        match disc? {
            Disc::Enum(e) => {
                let i = self.types[e];
                let DefKind::Enum(body) = &self.defs[i].kind else {
                    return None;
                };
                let member_names: Vec<String> =
                    body.members.iter().map(|m| m.name.name.clone()).collect();
                let n_members = body.members.len();
                let ok = match &name {
                    Some(n) => member_names.contains(n),
                    // A literal is fine when it is the value of a member.
                    None => (0..n_members).any(|j| self.member_value(i, j, e) == Some(value)),
                };
                if !ok {
                    let mut d = Diagnostic::error(format!(
                        "case label `{}` is not a member of enum `{e}`",
                        name.clone().unwrap_or_else(|| value.to_string())
                    ))
                    .at(l.loc(), format!("not in `{e}`"));
                    if let Some(s) = name
                        .as_deref()
                        .and_then(|n| did_you_mean(n, member_names.iter().map(String::as_str)))
                    {
                        d = d.help(format!("did you mean `{s}`?"));
                    } else {
                        d = d.help(format!("use one of: {}", member_names.join(", ")));
                    }
                    self.diags.push(d);
                    return None;
                }
            }
            Disc::Bool if value != 0 && value != 1 => {
                self.diags.push(
                    Diagnostic::error(format!("case value {value} is not a bool"))
                        .at(l.loc(), "not TRUE or FALSE")
                        .help("use `TRUE` or `FALSE`"),
                );
                return None;
            }
            Disc::Int if i32::try_from(value).is_err() => {
                self.diags.push(
                    Diagnostic::error(format!("case value {value} does not fit in an `int`"))
                        .at(l.loc(), "out of range"),
                );
                return None;
            }
            Disc::UInt if u32::try_from(value).is_err() => {
                self.diags.push(
                    Diagnostic::error(format!(
                        "case value {value} does not fit in an `unsigned int`"
                    ))
                    .at(l.loc(), "out of range"),
                );
                return None;
            }
            _ => {}
        }
        Some(Label {
            name,
            value: value as i64,
        })
    }

    fn number(&mut self, v: &Value, what: &str) -> Option<u32> {
        let n = match self.eval(v, Some((Prim::UInt, "a program number"))) {
            Some(n) => n,
            None => {
                if what == "program" && matches!(v, Value::Name(_)) {
                    if let Some(last) = self.diags.items.last_mut() {
                        last.message = format!(
                            "program number `{}` is not defined",
                            last.message
                                .trim_start_matches("unknown constant `")
                                .trim_end_matches('`')
                        );
                        last.help = vec![
                            "assign a number (RFC 5531 program numbers 0x20000000-0x3fffffff are defined by the user) or define a constant of that name".into(),
                        ];
                        last.notes
                            .push("the draft leaves a placeholder where the number belongs".into());
                    }
                }
                return None;
            }
        };
        match u32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => {
                self.diags.push(
                    Diagnostic::error(format!("{what} number {n} is out of range"))
                        .at(v.loc(), "must be an unsigned 32-bit integer"),
                );
                None
            }
        }
    }

    fn program(&mut self, p: &ast::Program) -> Option<ir::Program> {
        let number = self.number(&p.number, "program");
        let mut versions: Vec<ir::ProgramVersion> = Vec::new();
        for v in &p.versions {
            let Some(vn) = self.number(&v.number, "version") else {
                continue;
            };
            if let Some(prev) = versions.iter().find(|x| x.number == vn) {
                self.diags.push(
                    Diagnostic::error(format!("version number {vn} appears twice"))
                        .at(v.number.loc(), "duplicate version")
                        .also(&prev.loc, "first used here"),
                );
            }
            let mut procedures: Vec<ir::ProgramProcedure> = Vec::new();
            let mut seen: Vec<(u32, Loc)> = Vec::new();
            for pr in &v.procedures {
                let Some(n) = self.number(&pr.number, "procedure") else {
                    continue;
                };
                if let Some((_, prev)) = seen.iter().find(|(x, _)| *x == n) {
                    self.diags.push(
                        Diagnostic::error(format!("procedure number {n} appears twice"))
                            .at(pr.number.loc(), "duplicate procedure")
                            .also(prev, "first used here"),
                    );
                    continue;
                }
                seen.push((n, pr.number.loc().clone()));
                let mut args = Vec::new();
                for a in &pr.args {
                    args.extend(self.base(a));
                }
                let result = pr.result.as_ref().and_then(|r| self.base(r));
                procedures.push(ir::ProgramProcedure {
                    name: pr.name.name.clone(),
                    number: n,
                    args,
                    result: if pr.result.is_some() && result.is_none() {
                        continue;
                    } else {
                        result
                    },
                    origin: self.sources.file_line(&pr.name.loc),
                });
            }
            versions.push(ir::ProgramVersion {
                name: v.name.name.clone(),
                number: vn,
                procedures,
                loc: v.number.loc().clone(),
                origin: self.sources.file_line(&v.name.loc),
            });
        }
        Some(ir::Program {
            number: number?,
            versions,
        })
    }

    /// Picks each constant's Rust type: the written type of a typed constant, else the one
    /// type it is used at, else the smallest of u32, i32, u64, i64 that holds it.
    fn type_consts(&mut self, items: &mut [Item]) {
        for item in items.iter_mut() {
            let ItemKind::Const { value, ty, why } = &mut item.kind else {
                continue;
            };
            if !why.is_empty() && fits(*value, *ty) {
                continue;
            }
            let uses = self
                .const_uses
                .get(&item.xdr_name)
                .cloned()
                .unwrap_or_default();
            let kinds: Vec<Prim> = uses.iter().map(|u| u.0).collect();
            if let Some(first) = uses.first() {
                if kinds.iter().all(|k| *k == first.0) && fits(*value, first.0) {
                    *ty = first.0;
                    *why = format!("it is used as {}", first.1);
                    continue;
                }
            }
            *ty = [Prim::UInt, Prim::Int, Prim::UHyper, Prim::Hyper]
                .into_iter()
                .find(|p| fits(*value, *p))
                .unwrap_or(Prim::Hyper);
            *why = "no use fixes a type; the smallest of u32, i32, u64, i64 that holds the value"
                .into();
        }
    }
}

/// Whether `v` fits the Rust type of `p`.
pub fn fits(v: i128, p: Prim) -> bool {
    match p {
        Prim::Int => i32::try_from(v).is_ok(),
        Prim::UInt => u32::try_from(v).is_ok(),
        Prim::Hyper => i64::try_from(v).is_ok(),
        Prim::UHyper => u64::try_from(v).is_ok(),
        Prim::Bool => v == 0 || v == 1,
        Prim::Float | Prim::Double => false,
    }
}

fn prim_of(k: &TypeKind) -> Option<Prim> {
    Some(match k {
        TypeKind::Int => Prim::Int,
        TypeKind::UInt => Prim::UInt,
        TypeKind::Hyper => Prim::Hyper,
        TypeKind::UHyper => Prim::UHyper,
        TypeKind::Float => Prim::Float,
        TypeKind::Double => Prim::Double,
        TypeKind::Bool => Prim::Bool,
        _ => return None,
    })
}
