//! Constant values: evaluation, sizes, and the Rust type of each constant.

use super::MAX_CONST_CHAIN;
use super::{fits, Checker, DefKind, ValueSym};
use crate::ast::Value;
use crate::diag::{did_you_mean, Diagnostic};
use crate::ir::{Item, ItemKind, Prim, Size};

impl Checker<'_> {
    /// Evaluates a value; reports unknown names.
    pub(super) fn eval(&mut self, v: &Value, use_as: Option<(Prim, &'static str)>) -> Option<i128> {
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
                    d = d.note(format!(
                        "a value from a C header can be given with `--define {}=VALUE` (`Config::define` in build.rs)",
                        id.name
                    ));
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
    pub(super) fn member_value(&mut self, i: usize, j: usize, name: &str) -> Option<i128> {
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

    pub(super) fn eval_guarded(&mut self, name: &str, v: &Value) -> Option<i128> {
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

    pub(super) fn size(&mut self, v: &Value) -> Option<Size> {
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

    /// Picks each constant's Rust type: the written type of a typed constant, else the one
    /// type it is used at, else the smallest of u32, i32, u64, i64 that holds it.
    pub(super) fn type_consts(&mut self, items: &mut [Item]) {
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
