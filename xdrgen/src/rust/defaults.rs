//! `Default` for generated types, where a default value exists and is unambiguous:
//!
//! * an enum defaults to its member with value 0, or to its first declared member when none
//!   is 0 (the zero member is what a zeroed C structure from rpcgen holds and what four zero
//!   bytes decode to);
//! * a struct when every field has a default: numbers 0, `false`, empty variable-length
//!   data, lists and arrays, `None`, fixed-length opaque data as that many zero bytes, fixed
//!   arrays filled with their element's default, a non-empty list as one default element;
//! * a union when its discriminant can be 0 (`int`, `unsigned int`, `bool` as `false`, or an
//!   enum with a zero member) and that value selects an arm (an explicit case, or else the
//!   `default` arm) whose payload has a default: the value four zero bytes would start;
//! * a typedef newtype when its aliased shape has one.
//!
//! Every default value encodes. Recursive types get a default only when one is reachable
//! without recursion (the least fixpoint below), so `Default::default()` always returns.

use std::collections::HashSet;

use proc_macro2::TokenStream;
use quote::quote;

use super::{lit_usize, Gen};
use crate::ir::*;

/// The XDR names of the items that get a `Default`.
pub(super) fn defaultable_items(model: &Model) -> HashSet<String> {
    let mut set = HashSet::new();
    // Grow the set until nothing changes: an item joins once everything its default
    // needs is already in, so no default depends on itself.
    loop {
        let before = set.len();
        for item in &model.items {
            if !set.contains(&item.xdr_name) && item_has_default(model, &set, item) {
                set.insert(item.xdr_name.clone());
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

fn item_has_default(model: &Model, set: &HashSet<String>, item: &Item) -> bool {
    match &item.kind {
        ItemKind::Enum { members, .. } => !members.is_empty(),
        ItemKind::Struct { fields, .. } => fields.iter().all(|f| repr_has_default(set, &f.repr)),
        ItemKind::Typedef { repr, .. } => repr_has_default(set, repr),
        ItemKind::Union(u) => match default_arm(model, u) {
            Some(DefaultArm { payload, .. }) => payload_has_default(set, payload),
            None => false,
        },
        ItemKind::Const { .. } | ItemKind::StrConst { .. } | ItemKind::Program(_) => false,
    }
}

fn payload_has_default(set: &HashSet<String>, payload: &Payload) -> bool {
    match payload {
        Payload::Void => true,
        Payload::One(f) => repr_has_default(set, &f.repr),
        Payload::Many(fs) => fs.iter().all(|f| repr_has_default(set, &f.repr)),
    }
}

fn repr_has_default(set: &HashSet<String>, r: &Repr) -> bool {
    match r {
        Repr::Prim(_)
        | Repr::FixedOpaque(_)
        | Repr::VarOpaque(_)
        | Repr::Str(_)
        | Repr::VarArray(..)
        | Repr::Optional(_)
        | Repr::List(_) => true,
        Repr::Named(n) | Repr::NonEmptyList(n) => set.contains(n),
        Repr::FixedArray(e, _) | Repr::Boxed(e) => repr_has_default(set, e),
    }
}

/// The index of an enum's default member: the one with value 0, else the first.
pub(super) fn enum_default_index(members: &[EnumMember]) -> Option<usize> {
    members
        .iter()
        .position(|m| m.value == 0)
        .or((!members.is_empty()).then_some(0))
}

/// The default value of a union's discriminant: 0 (`false`, or an enum's zero member). An
/// enum without a zero member gives its union no default: which arm to pick is not clear.
fn disc_default(model: &Model, d: &Disc) -> Option<i64> {
    match d {
        Disc::Int | Disc::UInt | Disc::Bool => Some(0),
        Disc::Enum(e) => match model.get(e).map(|i| &i.kind) {
            Some(ItemKind::Enum { members, .. }) => {
                members.iter().any(|m| m.value == 0).then_some(0)
            }
            _ => None,
        },
    }
}

/// The arm a union's default value takes.
struct DefaultArm<'a> {
    /// The case label it is selected by; `None` for the `default` arm.
    label: Option<(usize, &'a Label)>,
    /// The discriminant's default value.
    value: i64,
    /// What the arm holds.
    payload: &'a Payload,
}

/// The arm selected by the discriminant's default value, with the index of its variant
/// (variants are numbered label by label, in order).
fn default_arm<'a>(model: &Model, u: &'a Union) -> Option<DefaultArm<'a>> {
    let value = disc_default(model, &u.disc)?;
    let labelled = u
        .arms
        .iter()
        .flat_map(|arm| arm.labels.iter().map(move |l| (l, arm)))
        .enumerate()
        .find(|(_, (l, _))| l.value == value);
    match labelled {
        Some((i, (l, arm))) => Some(DefaultArm {
            label: Some((i, l)),
            value,
            payload: &arm.payload,
        }),
        None => u.default.as_ref().map(|arm| DefaultArm {
            label: None,
            value,
            payload: &arm.payload,
        }),
    }
}

impl Gen<'_> {
    /// Whether the item named `xdr_name` gets a `Default`.
    pub(super) fn has_default(&self, xdr_name: &str) -> bool {
        self.defaults.contains(xdr_name)
    }

    /// Whether every field can take its Rust type's own `Default` (so `#[derive(Default)]`
    /// gives the right value).
    pub(super) fn all_natural_defaults(&self, fields: &[Field]) -> bool {
        fields
            .iter()
            .all(|f| self.natural_default(&f.repr) && repr_has_default(self.defaults, &f.repr))
    }

    /// Whether `Default::default()` of the Rust type of `r` is the value this module picks.
    fn natural_default(&self, r: &Repr) -> bool {
        match r {
            Repr::Prim(_)
            | Repr::VarOpaque(_)
            | Repr::Str(_)
            | Repr::VarArray(..)
            | Repr::Optional(_)
            | Repr::List(_) => true,
            // Rust's own defaults would be empty, which does not encode.
            Repr::FixedOpaque(_) | Repr::NonEmptyList(_) | Repr::FixedArray(..) => false,
            Repr::Boxed(e) => self.natural_default(e),
            Repr::Named(n) => match self.model.get(n).map(|i| &i.kind) {
                // A plain alias has no impl of its own: look through it.
                Some(ItemKind::Typedef {
                    repr,
                    newtype: false,
                }) => self.natural_default(repr),
                _ => true,
            },
        }
    }

    /// An expression for the default value of shape `r` (which has one).
    pub(super) fn default_expr(&self, r: &Repr) -> TokenStream {
        let rt = &self.rt;
        match r {
            Repr::FixedOpaque(s) => {
                let n = lit_usize(s.value as usize);
                quote!(#rt::Bytes::from(::std::vec![0u8; #n]))
            }
            Repr::FixedArray(e, n) if n.value > MAX_INLINE_ARRAY => {
                let e = self.default_expr(e);
                let n = lit_usize(n.value as usize);
                quote!(::std::iter::repeat_with(|| #e).take(#n).collect())
            }
            Repr::FixedArray(e, _) => {
                let e = self.default_expr(e);
                quote!(::core::array::from_fn(|_| #e))
            }
            Repr::NonEmptyList(n) => {
                let e = self.default_expr(&Repr::Named(n.clone()));
                quote!(::std::vec![#e])
            }
            Repr::Boxed(e) => {
                let e = self.default_expr(e);
                quote!(::std::boxed::Box::new(#e))
            }
            Repr::Named(n) => match self.model.get(n).map(|i| &i.kind) {
                Some(ItemKind::Typedef {
                    repr,
                    newtype: false,
                }) => self.default_expr(repr),
                _ => quote!(::core::default::Default::default()),
            },
            _ => quote!(::core::default::Default::default()),
        }
    }

    /// A manual `impl Default` for a struct whose fields do not all take their Rust
    /// type's default; empty when the struct derives it or has none.
    pub(super) fn struct_default_impl(
        &self,
        item: &Item,
        fields: &[Field],
        names: &[proc_macro2::Ident],
    ) -> TokenStream {
        if !self.has_default(&item.xdr_name) || self.all_natural_defaults(fields) {
            return TokenStream::new();
        }
        let name = super::ident::type_name(&item.xdr_name);
        let inits = fields.iter().zip(names).map(|(f, n)| {
            let e = self.default_expr(&f.repr);
            quote!(#n: #e,)
        });
        quote! {
            impl ::core::default::Default for #name {
                fn default() -> Self { Self { #(#inits)* } }
            }
        }
    }

    /// `impl Default` for a union, when its discriminant's default selects an arm with a
    /// default payload, and a sentence for the union's doc saying which. A `void` case is
    /// derived instead (the impl is empty, see [`Gen::union_derived_default`]). `variants` are the
    /// Rust variant names, one per case label, and `default_variant` the `default` arm's.
    pub(super) fn union_default_impl(
        &self,
        item: &Item,
        u: &Union,
        variants: &[proc_macro2::Ident],
        default_variant: Option<&proc_macro2::Ident>,
    ) -> (TokenStream, String) {
        let none = || (TokenStream::new(), String::new());
        if !self.has_default(&item.xdr_name) {
            return none();
        }
        let Some(arm) = default_arm(self.model, u) else {
            return none();
        };
        let fields = |fs: &[Field]| -> Vec<TokenStream> {
            fs.iter()
                .map(|f| {
                    let n = super::ident::field_name(&f.name);
                    let e = self.default_expr(&f.repr);
                    quote!(#n: #e,)
                })
                .collect()
        };
        let value = match arm.label {
            Some((i, _)) => {
                let v = &variants[i];
                match arm.payload {
                    // Derived instead, with `#[default]` on the variant.
                    Payload::Void => TokenStream::new(),
                    Payload::One(f) => {
                        let e = self.default_expr(&f.repr);
                        quote!(Self::#v(#e))
                    }
                    Payload::Many(fs) => {
                        let inits = fields(fs);
                        quote!(Self::#v { #(#inits)* })
                    }
                }
            }
            None => {
                let Some(dv) = default_variant else {
                    return none();
                };
                let label = Label {
                    name: None,
                    value: arm.value,
                };
                let disc = self.label_value(&u.disc, &label);
                match arm.payload {
                    Payload::Void => quote!(Self::#dv { discriminant: #disc }),
                    Payload::One(f) => {
                        let e = self.default_expr(&f.repr);
                        quote!(Self::#dv { discriminant: #disc, value: #e })
                    }
                    Payload::Many(fs) => {
                        let inits = fields(fs);
                        quote!(Self::#dv { discriminant: #disc, #(#inits)* })
                    }
                }
            }
        };
        let text = match arm.label {
            Some((_, l)) => format!(
                "\n\n`Default` is `case {}` with its payload's default.",
                l.name.clone().unwrap_or_else(|| l.value.to_string())
            ),
            None => {
                "\n\n`Default` is the `default` arm with the discriminant's zero value.".to_string()
            }
        };
        if value.is_empty() {
            return (TokenStream::new(), text);
        }
        let name = super::ident::type_name(&item.xdr_name);
        let tokens = quote! {
            impl ::core::default::Default for #name {
                fn default() -> Self { #value }
            }
        };
        (tokens, text)
    }

    /// A `Default` derive for a newtype typedef or a manual impl, or nothing.
    pub(super) fn newtype_default(&self, item: &Item, repr: &Repr) -> (bool, TokenStream) {
        if !self.has_default(&item.xdr_name) {
            return (false, TokenStream::new());
        }
        if self.natural_default(repr) {
            return (true, TokenStream::new());
        }
        let name = super::ident::type_name(&item.xdr_name);
        let e = self.default_expr(repr);
        (
            false,
            quote! {
                impl ::core::default::Default for #name {
                    fn default() -> Self { Self(#e) }
                }
            },
        )
    }

    /// The index of the variant (one per case label) that `#[derive(Default)]` marks
    /// `#[default]`: a union whose default is an explicit `void` case.
    pub(super) fn union_derived_default(&self, item: &Item, u: &Union) -> Option<usize> {
        if !self.has_default(&item.xdr_name) {
            return None;
        }
        match default_arm(self.model, u)? {
            DefaultArm {
                label: Some((i, _)),
                payload: Payload::Void,
                ..
            } => Some(i),
            _ => None,
        }
    }

    /// Whether the default value of shape `r` allocates (zero-filled fixed opaque data,
    /// boxes, a non-empty list's element, large fixed arrays).
    fn default_allocates(&self, r: &Repr) -> bool {
        match r {
            Repr::FixedOpaque(s) => s.value > 0,
            Repr::NonEmptyList(_) | Repr::Boxed(_) => true,
            Repr::FixedArray(_, n) if n.value > MAX_INLINE_ARRAY => true,
            Repr::FixedArray(e, _) => self.default_allocates(e),
            // `None` and empty vectors and data: no allocation, and no recursion either (every
            // XDR cycle goes through one of these).
            Repr::Prim(_)
            | Repr::VarOpaque(_)
            | Repr::Str(_)
            | Repr::VarArray(..)
            | Repr::Optional(_)
            | Repr::List(_) => false,
            Repr::Named(n) => match self.model.get(n).map(|i| &i.kind) {
                Some(ItemKind::Struct { fields, .. }) => {
                    fields.iter().any(|f| self.default_allocates(&f.repr))
                }
                Some(ItemKind::Typedef { repr, .. }) => self.default_allocates(repr),
                Some(ItemKind::Union(u)) => match default_arm(self.model, u) {
                    Some(DefaultArm { payload, .. }) => match payload {
                        Payload::Void => false,
                        Payload::One(f) => self.default_allocates(&f.repr),
                        Payload::Many(fs) => fs.iter().any(|f| self.default_allocates(&f.repr)),
                    },
                    None => false,
                },
                _ => false,
            },
        }
    }

    /// Whether a new value of item `item` is best decoded as its default decoded in place:
    /// it has a default that costs no allocation, so the in-place decode (which reads each
    /// list straight into its vector, with no intermediate values moved up the call chain)
    /// builds the value. Only asked of items that have an in-place decode.
    pub(super) fn decodes_via_default(&self, item: &Item) -> bool {
        self.has_default(&item.xdr_name)
            && !item.props.recursive
            && !self.default_allocates(&Repr::Named(item.xdr_name.clone()))
    }
}
