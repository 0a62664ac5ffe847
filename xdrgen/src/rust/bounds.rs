//! Maximum encoded sizes of generated types (`rpcrdma::xdr::EncodedSize`), so a requester can
//! decide before sending whether a reply may outgrow the inline threshold and needs a Reply
//! chunk (seed 002 sections 4.1 and 4.3).
//!
//! Computed here as numbers: a struct is the sum of its fields, a union its discriminant plus
//! its largest arm, an unbounded array, opaque or string (no declared maximum), a linked list
//! or a recursive type is unbounded (`None`). The inline bound counts a DDP-eligible item as
//! what stays inline when it moves: its length or count (seed 004 section 4.4.3.1), its
//! "is present" flag (section 4.4.3.2), nothing for fixed-length items.

use proc_macro2::TokenStream;
use quote::quote;

use super::{padding, type_name, Gen};
use crate::check::ddp::DDP;
use crate::ir::{Field, Item, ItemKind, Payload, Prim, Repr};

/// Typedef and type nesting deeper than this is treated as unbounded (recursion guard).
const MAX_NESTING: usize = 64;

impl Gen<'_> {
    /// `impl EncodedSize for T` for a struct, union, enum or typedef.
    pub(super) fn encoded_size_impl(&self, item: &Item) -> TokenStream {
        let rt = &self.rt;
        if !matches!(
            item.kind,
            ItemKind::Struct { .. } | ItemKind::Union(_) | ItemKind::Enum { .. }
        ) && !matches!(item.kind, ItemKind::Typedef { newtype: true, .. })
        {
            return TokenStream::new();
        }
        if matches!(
            item.kind,
            ItemKind::Struct {
                list_next: Some(_),
                ..
            }
        ) {
            // A list element's own encoding is one element; lists of it are unbounded.
            return TokenStream::new();
        }
        let name = type_name(&item.xdr_name);
        let max = option(self.item_bound(item, false, 0));
        let inline = option(self.item_bound(item, true, 0));
        quote! {
            impl #rt::EncodedSize for #name {
                const MAX_LEN: ::core::option::Option<usize> = #max;
                const MAX_INLINE_LEN: ::core::option::Option<usize> = #inline;
            }
        }
    }

    fn item_bound(&self, item: &Item, inline: bool, depth: usize) -> Option<usize> {
        if depth > MAX_NESTING || item.props.recursive {
            return None;
        }
        match &item.kind {
            ItemKind::Enum { .. } => Some(4),
            ItemKind::Typedef { repr, .. } => self.repr_bound(repr, inline, depth + 1),
            ItemKind::Struct {
                fields,
                list_next: None,
            } => fields.iter().try_fold(0usize, |acc, f| {
                acc.checked_add(self.field_bound(f, inline, depth)?)
            }),
            ItemKind::Union(u) => {
                let mut largest = 0usize;
                for arm in u.arms.iter().chain(u.default.iter()) {
                    let size = match &arm.payload {
                        Payload::Void => 0,
                        Payload::One(f) => self.field_bound(f, inline, depth)?,
                        Payload::Many(fs) => fs.iter().try_fold(0usize, |acc, f| {
                            acc.checked_add(self.field_bound(f, inline, depth)?)
                        })?,
                    };
                    largest = largest.max(size);
                }
                largest.checked_add(4)
            }
            _ => None,
        }
    }

    fn field_bound(&self, f: &Field, inline: bool, depth: usize) -> Option<usize> {
        if inline && f.annotations.iter().any(|a| a.name == DDP) {
            return self.moved_inline_bound(&f.repr, depth);
        }
        self.repr_bound(&f.repr, inline, depth + 1)
    }

    /// What stays inline of a DDP-eligible item that has moved to a chunk.
    fn moved_inline_bound(&self, r: &Repr, depth: usize) -> Option<usize> {
        match r {
            Repr::VarOpaque(_) | Repr::Str(_) | Repr::VarArray(..) => Some(4),
            Repr::FixedOpaque(_) | Repr::FixedArray(..) => Some(0),
            Repr::Optional(inner) => self.moved_inline_bound(inner, depth + 1)?.checked_add(4),
            Repr::Named(n) if depth < MAX_NESTING => match self.model.get(n).map(|i| &i.kind) {
                Some(ItemKind::Typedef { repr, .. }) => self.moved_inline_bound(repr, depth + 1),
                _ => None,
            },
            _ => None,
        }
    }

    fn repr_bound(&self, r: &Repr, inline: bool, depth: usize) -> Option<usize> {
        if depth > MAX_NESTING {
            return None;
        }
        match r {
            Repr::Prim(Prim::Hyper | Prim::UHyper | Prim::Double) => Some(8),
            Repr::Prim(_) => Some(4),
            Repr::Named(n) => self.item_bound(self.model.get(n)?, inline, depth + 1),
            Repr::FixedOpaque(s) => Some(s.value as usize + padding(s.value as usize)),
            Repr::VarOpaque(m) | Repr::Str(m) => {
                let m = m.as_ref()?.value as usize;
                Some(4 + m + padding(m))
            }
            Repr::FixedArray(e, n) => {
                (n.value as usize).checked_mul(self.repr_bound(e, inline, depth + 1)?)
            }
            Repr::VarArray(e, m) => (m.as_ref()?.value as usize)
                .checked_mul(self.repr_bound(e, inline, depth + 1)?)?
                .checked_add(4),
            Repr::Optional(e) => self.repr_bound(e, inline, depth + 1)?.checked_add(4),
            Repr::Boxed(_) | Repr::List(_) | Repr::NonEmptyList(_) => None,
        }
    }
}

fn option(v: Option<usize>) -> TokenStream {
    match v {
        Some(n) => {
            let n = proc_macro2::Literal::usize_unsuffixed(n);
            quote!(::core::option::Option::Some(#n))
        }
        None => quote!(::core::option::Option::None),
    }
}
