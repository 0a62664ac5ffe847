//! Unknown and missing names: reversed typedefs, rpcgen's C-library fallbacks, and what
//! each unknown type name is taken to mean (or why it is an error).

use std::collections::{BTreeMap, HashSet};

use super::PRELUDE_FILE;
use super::{builtin_type, names, Checker, Def, DefKind, Rename};
use crate::ast::{self, DeclKind, Definition, Ident, Tag, TypeKind, Value};
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::Prim;

/// One reference to a type name.
#[derive(Debug, Clone)]
pub(super) struct TypeUse {
    /// The name, where it is written.
    pub name: Ident,
    /// How it is used: "disc", "const", `field:NAME`, "arg" or "result".
    pub how: String,
    /// The definition holding it.
    pub container: String,
    /// The keyword it was written with (`struct X`), if any.
    pub tag: Option<Tag>,
}

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
                    tag: None,
                }),
                annotations: Vec::new(),
                loc: d.loc.clone(),
            };
            self.defs[i].name = new_name;
            self.defs[i].kind = DefKind::Typedef(decl);
        }
    }

    /// Every type reference: (name, use); see [`TypeUse::how`].
    pub(super) fn type_refs(&self) -> Vec<(Ident, String)> {
        self.type_refs_in()
            .into_iter()
            .map(|u| (u.name, u.how))
            .collect()
    }

    /// Every type reference, with the definition holding it.
    pub(super) fn type_refs_in(&self) -> Vec<TypeUse> {
        let mut all = Vec::new();
        for d in &self.defs {
            let mut out = Vec::new();
            Self::refs_of(d, &mut out);
            all.extend(out.into_iter().map(|(name, how, tag)| TypeUse {
                name,
                how,
                container: d.name.name.clone(),
                tag,
            }));
        }
        all
    }

    pub(super) fn refs_of(d: &Def, out: &mut Vec<(Ident, String, Option<Tag>)>) {
        fn ty(t: &ast::Type, how: &str, out: &mut Vec<(Ident, String, Option<Tag>)>) {
            if let TypeKind::Named(n) = &t.kind {
                out.push((n.clone(), how.to_string(), t.tag));
            }
        }
        fn decl(d: &ast::Decl, out: &mut Vec<(Ident, String, Option<Tag>)>) {
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
                        pr.result.iter().for_each(|t| ty(t, "result", out));
                        pr.args.iter().for_each(|t| ty(t, "arg", out));
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
        let referenced: HashSet<&str> = refs.iter().map(|u| u.name.name.as_str()).collect();
        let mut unknown: BTreeMap<String, Vec<TypeUse>> = BTreeMap::new();
        for u in &refs {
            if self.types.contains_key(&u.name.name) || builtin_type(&u.name.name, false).is_some()
            {
                continue;
            }
            unknown
                .entry(u.name.name.clone())
                .or_default()
                .push(u.clone());
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
            let first = &uses[0].name;
            let (rename, diag) = self.explain_unknown(&name, first, &uses, &unused);
            self.diags.push(diag);
            if rename.is_none() || !self.lenient {
                self.unresolved.push(crate::ir::Unresolved {
                    name: first.clone(),
                    lenient_reads_it: rename.is_some(),
                });
            }
            self.renames.insert(name, rename);
        }
    }

    /// Why candidate definition `cand` cannot be what the uses of an unknown name mean
    /// (`None`: it can). The uses' evidence: the keyword written (`struct X` needs a
    /// struct), a discriminant or a constant's type (an enum or a typedef), a procedure
    /// argument (not a union: the unions a file defines and leaves unused are carried
    /// elsewhere, as credentials in the RPC header are).
    fn kind_mismatch(&self, cand: &str, uses: &[TypeUse]) -> Option<String> {
        let kind = &self.defs[self.types[cand]].kind;
        let what = match kind {
            DefKind::Struct(_) => "a struct",
            DefKind::Union(_) => "a union",
            DefKind::Enum(_) => "an enum",
            _ => "a typedef",
        };
        for u in uses {
            let fits = match (u.tag, kind) {
                (Some(Tag::Struct), DefKind::Struct(_))
                | (Some(Tag::Union), DefKind::Union(_))
                | (Some(Tag::Enum), DefKind::Enum(_)) => true,
                (Some(_), _) => false,
                (None, _) => match u.how.as_str() {
                    "disc" | "const" => matches!(kind, DefKind::Enum(_) | DefKind::Typedef(_)),
                    "arg" => !matches!(kind, DefKind::Union(_)),
                    _ => true,
                },
            };
            if !fits {
                let used = match (u.tag, u.how.as_str()) {
                    (Some(Tag::Struct), _) => "written `struct`".to_string(),
                    (Some(Tag::Union), _) => "written `union`".to_string(),
                    (Some(Tag::Enum), _) => "written `enum`".to_string(),
                    (None, "disc") => "a union discriminant".to_string(),
                    (None, "const") => "a constant's type".to_string(),
                    (None, _) => "a procedure argument".to_string(),
                };
                return Some(format!(
                    "`{cand}` is {what}, and `{}` is {used}",
                    u.name.name
                ));
            }
        }
        None
    }

    /// The diagnostic for the unknown type `name` and what lenient mode reads it as (`None`:
    /// nothing; the diagnostic is then an error in both modes).
    ///
    /// Lenient mode reads an undefined name only where the reading cannot change the bytes on
    /// the wire from what the file's author meant:
    /// * `uint32`, `uint64`, `int32`, `int64`: the name states the width and the signedness;
    /// * a name used only as a union discriminant or a constant's type: `unsigned int`
    ///   (RFC 4506 section 4.15: a discriminant is `int`, `unsigned int` or an enum, four
    ///   bytes each; a constant has no encoding);
    /// * a name used by a declaration that is named after an unused definition of the kind the
    ///   uses need (the C habit `T T;`, rfc5666bis-01 section 5.6: `rpcrdma1_body rdma_body;`
    ///   with `union rdma_body`): the file spells the type meant.
    ///
    /// A name that merely resembles a definition's (a shared last `_` segment, a small edit
    /// distance) is suggested, never read as it: nothing ties the undefined type's encoding
    /// to the similar one's (RFC 2203's `proc_req_arg_t`, a procedure's own arguments, shares
    /// its `_t` with the credential union `rpc_gss_cred_t`).
    pub(super) fn explain_unknown(
        &self,
        name: &str,
        first: &Ident,
        uses: &[TypeUse],
        unused: &[String],
    ) -> (Option<Rename>, Diagnostic) {
        let n_uses = uses.len();
        let more = if n_uses > 1 {
            format!(" (and {} more use(s))", n_uses - 1)
        } else {
            String::new()
        };
        let unknown = || Diagnostic::error(format!("unknown type `{name}`"));
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
        // Candidates: unused definitions other than the ones holding the uses.
        let pool: Vec<&String> = unused
            .iter()
            .filter(|u| !uses.iter().any(|x| &x.container == *u))
            .collect();
        let named_by_field: Vec<&String> = pool
            .iter()
            .copied()
            .filter(|u| {
                uses.iter()
                    .any(|x| x.how.strip_prefix("field:") == Some(u.as_str()))
            })
            .collect();
        let at = |c: &str| self.defs[self.types[c]].name.loc.clone();
        let listed = |cands: &[&String]| {
            cands
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match named_by_field.as_slice() {
            [] => {}
            [cand] if self.kind_mismatch(cand, uses).is_none() => {
                let cand = (*cand).clone();
                let d = Diagnostic::quirk(self.lenient, format!("unknown type `{name}`"))
                    .at(&first.loc, format!("not defined{more}"))
                    .also(
                        &at(&cand),
                        format!("`{cand}` is defined here and never used"),
                    )
                    .help(format!("did you mean `{cand}`? rename one of the two"))
                    .note(format!("lenient mode reads `{name}` as `{cand}`"));
                return (Some(Rename::Type(cand)), d);
            }
            [cand] => {
                let why = self.kind_mismatch(cand, uses).unwrap_or_default();
                let d = unknown()
                    .at(&first.loc, format!("not defined{more}"))
                    .also(&at(cand), format!("`{cand}` is defined here and never used"))
                    .help(format!(
                        "define `{name}`, or rename `{cand}` if it is the one meant"
                    ))
                    .note(format!(
                        "lenient mode reads `{name}` as the definition the field is named after only if it is of the kind the uses need: {why}"
                    ));
                return (None, d);
            }
            several => {
                let mut d = unknown().at(&first.loc, format!("not defined{more}"));
                for c in several {
                    d = d.also(&at(c), format!("`{c}` is defined here and never used"));
                }
                let d = d
                    .help(format!(
                        "did you mean one of {}? rename the one meant, or define `{name}`",
                        listed(several)
                    ))
                    .note("its uses are named after different definitions: lenient mode does not choose");
                return (None, d);
            }
        }
        let last = |s: &str| s.rsplit('_').next().unwrap_or(s).to_string();
        let resembling: Vec<&String> = pool
            .iter()
            .copied()
            .filter(|u| {
                (last(u) == last(name) && u.contains('_') && name.contains('_'))
                    || crate::diag::edit_distance(u, name) <= name.len() / 3
            })
            .collect();
        // Used only as a discriminant or a constant's type: an integer type in all but name.
        if uses.iter().all(|u| u.how == "disc" || u.how == "const") {
            let mut d = Diagnostic::quirk(self.lenient, format!("unknown type `{name}`"))
                .at(&first.loc, format!("not defined{more}"));
            let fitting: Vec<&String> = resembling
                .iter()
                .copied()
                .filter(|c| self.kind_mismatch(c, uses).is_none())
                .collect();
            match fitting.as_slice() {
                [] => {}
                [cand] => d = d.help(format!("did you mean `{cand}`?")),
                several => d = d.help(format!("did you mean one of {}?", listed(several))),
            }
            let d = d
                .help(format!(
                    "define it, e.g. `typedef unsigned int {name};`, or use `unsigned int`"
                ))
                .note(format!(
                    "lenient mode treats `{name}` as `unsigned int`: it is only used as a union discriminant or a constant's type"
                ));
            return (Some(Rename::Prim(Prim::UInt)), d);
        }
        if !resembling.is_empty() {
            let mut d = unknown().at(&first.loc, format!("not defined{more}"));
            for c in &resembling {
                d = d.also(&at(c), format!("`{c}` is defined here and never used"));
            }
            let d = match resembling.as_slice() {
                [cand] => match self.kind_mismatch(cand, uses) {
                    None => d.help(format!(
                        "did you mean `{cand}`? write that name here, or define `{name}`"
                    )),
                    Some(why) => d
                        .help(format!(
                            "define `{name}`, or rename `{cand}` if it is the one meant"
                        ))
                        .note(why),
                },
                several => d.help(format!(
                    "did you mean one of {}? write the one meant here, or define `{name}`",
                    listed(several)
                )),
            };
            let d = d.note(format!(
                "lenient mode does not read `{name}` as a definition whose name resembles it: nothing says the two are encoded alike"
            ));
            return (None, d);
        }
        let all_names = self
            .types
            .keys()
            .map(String::as_str)
            .chain(names::BUILTIN_NAMES.iter().copied());
        let mut d = unknown().at(&first.loc, format!("not defined{more}"));
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
