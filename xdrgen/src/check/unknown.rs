//! Unknown and missing names: reversed typedefs, rpcgen's C-library fallbacks, and what
//! each unknown type name is taken to mean (or why it is an error).

use std::collections::{BTreeMap, HashSet};

use super::PRELUDE_FILE;
use super::{builtin_type, names, Checker, Def, DefKind, Rename};
use crate::ast::{self, DeclKind, Definition, Ident, TypeKind, Value};
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::Prim;

impl Checker<'_> {
    /// `typedef struct X X;` (a C habit, nis.x): the struct is already a type.
    pub(super) fn drop_self_typedefs(&mut self) {
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
    pub(super) fn add_prelude(&mut self, prelude: &ast::Specification) {
        for (def, loc) in &prelude.definitions {
            if let Definition::Const { name, .. } = def {
                if crate::defines::is_define_source(self.sources, loc.file) {
                    if let Some(own) = self.defs.iter().find(|d| d.name.name == name.name) {
                        self.diags.push(
                            Diagnostic::warning(format!(
                                "`--define {}` is not used: the input defines `{}` itself",
                                name.name, name.name
                            ))
                            .at(loc, "not used")
                            .also(&own.name.loc, "defined here"),
                        );
                    }
                }
            }
        }
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
                    if self.sources.name(loc.file) != PRELUDE_FILE
                        && !crate::defines::is_define_source(self.sources, loc.file)
                    {
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
    pub(super) fn value_refs(&self) -> HashSet<String> {
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

    pub(super) fn is_type_name(&self, name: &str) -> bool {
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
    pub(super) fn fix_reversed_typedefs(&mut self) {
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

    /// Every type reference: (name, location, use). Uses: "disc", "const", "field:<name>", "proc".
    pub(super) fn type_refs(&self) -> Vec<(Ident, String)> {
        self.type_refs_in()
            .into_iter()
            .map(|(i, h, _)| (i, h))
            .collect()
    }

    /// Every type reference: (name, use, containing definition).
    pub(super) fn type_refs_in(&self) -> Vec<(Ident, String, String)> {
        let mut all = Vec::new();
        for d in &self.defs {
            let mut out = Vec::new();
            Self::refs_of(d, &mut out);
            all.extend(out.into_iter().map(|(i, h)| (i, h, d.name.name.clone())));
        }
        all
    }

    pub(super) fn refs_of(d: &Def, out: &mut Vec<(Ident, String)>) {
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
    pub(super) fn resolve_unknown_types(&mut self) {
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
            if rename.is_none() {
                self.unresolved.push(first.clone());
            }
            self.renames.insert(name, rename);
        }
    }

    pub(super) fn explain_unknown(
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
}
