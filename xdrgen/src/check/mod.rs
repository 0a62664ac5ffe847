//! Checking: names, constants, types, recursion and linked lists, from the parsed files (one
//! namespace, later files may use earlier definitions and vice versa) to the [`Model`](crate::ir::Model).
//!
//! One function per rule; every problem becomes a diagnostic and checking goes on, so a user
//! sees all of them at once. Quirks of the old drafts are repaired the same way in both modes
//! (so one defect does not cascade) but are errors unless lenient mode is on.

pub mod ddp;
mod graph;
mod items;
mod names;
mod unknown;
mod values;

use std::collections::{HashMap, HashSet};

use crate::ast::{self, DeclKind, Definition, Ident, Loc, TypeKind, Value};
use crate::diag::{Diagnostic, Diagnostics, Sources};
use crate::ir::{self, Prim};

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
    /// The first use of each unknown type name left unresolved (an error).
    unresolved: Vec<ir::Unresolved>,
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
        unresolved: Vec::new(),
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
    /// Adds a definition, first hoisting inline `struct {..}`/`enum {..}`/`union switch ..`
    /// type specifiers out as named definitions `PARENT_FIELD`.
    fn hoist(&mut self, def: Definition, loc: Loc) {
        let (name, kind) = match def {
            Definition::Typedef(mut d) => {
                for a in &d.annotations {
                    self.diags.push(
                        Diagnostic::warning(format!(
                            "annotation `@{}` on a typedef is ignored: marks apply to struct fields and union arms",
                            a.name
                        ))
                        .at(&a.loc, "ignored")
                        .also(&d.name.loc, "typedef")
                        .help(format!(
                            "mark the fields of type `{}` instead (`/* @{} */` before each, or `--ddp Type.member`)",
                            d.name.name, a.name
                        )),
                    );
                }
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
