//! From definitions to model items: enums, structs, unions, typedefs and programs.

use std::collections::HashMap;

use super::{builtin_type, prim_of, Checker, Def, DefKind, Rename};
use crate::ast::{self, DeclKind, Loc, TypeKind, Value};
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::{self, Disc, Field, Item, ItemKind, Label, Payload, Prim, Props, Repr};

impl Checker<'_> {
    pub(super) fn build_model(&mut self) -> ir::Model {
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
        let mut model = ir::Model {
            items,
            unresolved: self.unresolved.clone(),
        };
        super::graph::finish(&mut model, self.diags);
        model
    }

    pub(super) fn item_kind(&mut self, d: &Def) -> Option<ItemKind> {
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
    pub(super) fn alias_prim(&self, name: &str) -> Option<Prim> {
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

    pub(super) fn enum_item(&mut self, b: &ast::EnumBody) -> ItemKind {
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

    pub(super) fn field(&mut self, d: &ast::Decl) -> Option<Field> {
        Some(Field {
            name: d.name.name.clone(),
            repr: self.decl_repr(d)?,
            annotations: d.annotations.clone(),
            loc: d.loc.clone(),
        })
    }

    pub(super) fn decl_repr(&mut self, d: &ast::Decl) -> Option<Repr> {
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
    pub(super) fn base(&mut self, t: &ast::Type) -> Option<Repr> {
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

    pub(super) fn disc(&mut self, t: &ast::Type) -> Option<Disc> {
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

    pub(super) fn union_item(&mut self, b: &ast::UnionBody) -> Option<ir::Union> {
        self.check_arm_names(b);
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

    /// Reports an arm that declares a name another arm of the same union already declared
    /// (RFC 4506 section 6.4, note 4: "variable names must be unique within the scope of
    /// struct and union declarations"). rpcgen puts the arms in one C union, whose two
    /// members of one name do not compile. A quirk: the Rust variants are named after their
    /// case labels, so lenient mode keeps both arms. When the two declarations are written
    /// the same, the hint is to let the case labels share one arm (same wire bytes).
    fn check_arm_names(&mut self, b: &ast::UnionBody) {
        let mut seen: Vec<(&ast::Decl, &ast::Arm)> = Vec::new();
        for arm in b.arms.iter().chain(&b.default) {
            for d in &arm.decls {
                let Some(&(prev, prev_arm)) = seen.iter().find(|(p, _)| p.name.name == d.name.name)
                else {
                    seen.push((d, arm));
                    continue;
                };
                let text = |loc: &Loc| {
                    let t = &self.sources.text(loc.file)[loc.span.clone()];
                    t.split_whitespace().collect::<Vec<_>>().join(" ")
                };
                let labels = |a: &ast::Arm| {
                    a.labels
                        .iter()
                        .map(|l| format!("case {}:", text(l.loc())))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let same = text(&prev.loc) == text(&d.loc)
                    && arm.decls.len() == 1
                    && prev_arm.decls.len() == 1;
                let help = if same && arm.labels.is_empty() {
                    // `default` comes last and takes no other label (RFC 4506 section 6.3).
                    format!(
                        "`default:` carries the same `{}`: drop the arm `{}` and let its \
                         values fall to `default:` (same wire bytes)",
                        text(&d.loc),
                        labels(prev_arm)
                    )
                } else if same {
                    format!(
                        "both arms carry `{}`: let the case labels share one arm, \
                         `{} {} {};` (same wire bytes)",
                        text(&d.loc),
                        labels(prev_arm),
                        labels(arm),
                        text(&d.loc)
                    )
                } else {
                    format!("give one of the two `{}` another name", d.name.name)
                };
                self.diags.push(
                    Diagnostic::quirk(
                        self.lenient,
                        format!("union arm `{}` is declared twice", d.name.name),
                    )
                    .at(&d.name.loc, "redeclared in this arm")
                    .also(&prev.name.loc, "first declared here")
                    .help(help)
                    .note(
                        "RFC 4506 section 6.4: names must be unique within a union; \
                         lenient mode keeps both arms (the Rust variants are named after their \
                         case labels)",
                    ),
                );
            }
        }
    }

    pub(super) fn payload(&mut self, decls: &[ast::Decl]) -> Option<Payload> {
        Some(match decls {
            [] => Payload::Void,
            [one] => Payload::One(self.field(one)?),
            many => {
                let v: Vec<Option<Field>> = many.iter().map(|d| self.field(d)).collect();
                Payload::Many(v.into_iter().collect::<Option<Vec<_>>>()?)
            }
        })
    }

    /// "case label `written` is not a member of enum `e`", with the closest member or the
    /// list of members; `undefined`: the label is not defined anywhere either.
    fn not_a_member(&self, e: &str, written: &str, l: &Value, undefined: bool) -> Diagnostic {
        let members: Vec<&str> = match self.types.get(e).map(|&i| &self.defs[i].kind) {
            Some(DefKind::Enum(body)) => {
                body.members.iter().map(|m| m.name.name.as_str()).collect()
            }
            _ => Vec::new(),
        };
        let label = if undefined {
            format!("not in `{e}`, and not defined elsewhere")
        } else {
            format!("not in `{e}`")
        };
        let d = Diagnostic::error(format!(
            "case label `{written}` is not a member of enum `{e}`"
        ))
        .at(l.loc(), label);
        match did_you_mean(written, members.iter().copied()) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(format!("use one of: {}", members.join(", "))),
        }
    }

    /// A case label, checked against the discriminant type (RFC 4506 section 4.15).
    pub(super) fn label(&mut self, l: &Value, disc: Option<&Disc>) -> Option<Label> {
        let name = match l {
            Value::Name(n) => Some(n.name.clone()),
            Value::Lit { .. } | Value::Str { .. } | Value::Offset { .. } => None,
        };
        let use_as = match disc {
            Some(Disc::Int) => Some((Prim::Int, "a case label of an `int` union")),
            Some(Disc::UInt) => Some((Prim::UInt, "a case label of an `unsigned int` union")),
            _ => None,
        };
        // A name defined nowhere, under an enum discriminant: say it is not a member (the
        // enum's members are what the user can write) rather than only "unknown constant".
        if let (Some(n), Some(Disc::Enum(e))) = (&name, disc) {
            if !self.values.contains_key(n) {
                let d = self.not_a_member(e, n, l, true);
                self.diags.push(d);
                return None;
            }
        }
        let value = self.eval(l, use_as)?;
        match disc? {
            Disc::Enum(e) => {
                let i = self.types[e];
                let DefKind::Enum(body) = &self.defs[i].kind else {
                    return None;
                };
                let n_members = body.members.len();
                let ok = match &name {
                    Some(n) => body.members.iter().any(|m| &m.name.name == n),
                    // A literal is fine when it is the value of a member.
                    None => (0..n_members).any(|j| self.member_value(i, j, e) == Some(value)),
                };
                if !ok {
                    let written = name.clone().unwrap_or_else(|| value.to_string());
                    let d = self.not_a_member(e, &written, l, false);
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

    pub(super) fn number(&mut self, v: &Value, what: &str) -> Option<u32> {
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
                        last.notes =
                            vec!["the draft leaves a placeholder where the number belongs".into()];
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

    pub(super) fn program(&mut self, p: &ast::Program) -> Option<ir::Program> {
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
            number_loc: p.number.loc().clone(),
            versions,
        })
    }
}
