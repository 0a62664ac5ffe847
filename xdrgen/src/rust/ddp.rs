//! DDP-eligible fields (marked by `check::ddp`): chunk-aware encode and decode calls.

use proc_macro2::TokenStream;
use quote::quote;

use super::ident::type_name;
use super::{lit_usize, Gen};
use crate::ir::*;

impl Gen<'_> {
    /// Whether a field carries a DDP-eligibility mark (checked by `check::ddp`).
    pub(super) fn is_ddp(f: &Field) -> bool {
        f.annotations
            .iter()
            .any(|a| a.name == crate::check::ddp::DDP)
    }

    /// Statements encoding field `f`; DDP-eligible fields go through the chunk-aware calls,
    /// which encode exactly like the plain ones unless the encoder has a chunking policy.
    pub(super) fn encode_field(&self, f: &Field, expr: TokenStream) -> TokenStream {
        if Self::is_ddp(f) {
            if let Some(tokens) = self.encode_ddp(&f.repr, expr.clone(), 0) {
                return tokens;
            }
        }
        self.encode(&f.repr, expr)
    }

    /// An expression decoding field `f`.
    pub(super) fn decode_field(&self, f: &Field) -> TokenStream {
        if Self::is_ddp(f) {
            if let Some(tokens) = self.decode_ddp(&f.repr, 0) {
                return tokens;
            }
        }
        self.decode(&f.repr)
    }

    /// The typedef behind `name`, if it is one: its shape and whether it is a newtype.
    pub(super) fn typedef_of(&self, name: &str) -> Option<(&Repr, bool)> {
        match self.model.get(name).map(|i| &i.kind) {
            Some(ItemKind::Typedef { repr, newtype }) => Some((repr, *newtype)),
            _ => None,
        }
    }

    /// Chunk-aware encoding of a DDP-eligible shape (seed 004 section 4.4.3): `None` for
    /// shapes that stay plain XDR (fixed-length arrays, arrays of non-natural elements).
    pub(super) fn encode_ddp(
        &self,
        r: &Repr,
        expr: TokenStream,
        depth: usize,
    ) -> Option<TokenStream> {
        Some(match r {
            Repr::FixedOpaque(s) => {
                let n = lit_usize(s.value as usize);
                quote!(enc.put_ddp_fixed_opaque(#expr, #n)?;)
            }
            Repr::VarOpaque(m) => {
                let m = self.max(m);
                quote!(enc.put_ddp_opaque(#expr, #m)?;)
            }
            Repr::Str(m) => {
                let m = self.max(m);
                quote!(enc.put_ddp_string(#expr, #m)?;)
            }
            Repr::VarArray(e, m) if e.is_natural() => {
                let m = self.max(m);
                quote!(enc.put_ddp_array(#expr, #m)?;)
            }
            // Seed 004 section 4.4.3.2: the "is present" flag stays inline.
            Repr::Optional(e) => {
                let inner = self.encode_ddp(e, quote!(item), depth + 1)?;
                quote! {
                    match #expr {
                        ::core::option::Option::Some(item) => { enc.put_bool(true); #inner }
                        ::core::option::Option::None => enc.put_bool(false),
                    }
                }
            }
            Repr::Named(n) if depth < 32 => {
                let (repr, newtype) = self.typedef_of(n)?;
                let inner = if newtype { quote!(&(#expr).0) } else { expr };
                self.encode_ddp(repr, inner, depth + 1)?
            }
            _ => return None,
        })
    }

    /// The decoding counterpart of [`Gen::encode_ddp`].
    pub(super) fn decode_ddp(&self, r: &Repr, depth: usize) -> Option<TokenStream> {
        Some(match r {
            Repr::FixedOpaque(s) => {
                let n = lit_usize(s.value as usize);
                quote!(dec.get_ddp_fixed_opaque(#n)?)
            }
            Repr::VarOpaque(m) => {
                let m = self.max(m);
                quote!(dec.get_ddp_opaque(#m)?)
            }
            Repr::Str(m) => {
                let m = self.max(m);
                quote!(dec.get_ddp_string(#m)?)
            }
            Repr::VarArray(e, m) if e.is_natural() => {
                let m = self.max(m);
                quote!(dec.get_ddp_array(#m)?)
            }
            Repr::Optional(e) => {
                let inner = self.decode_ddp(e, depth + 1)?;
                quote! {
                    if dec.get_present()? { ::core::option::Option::Some(#inner) } else { ::core::option::Option::None }
                }
            }
            Repr::Named(n) if depth < 32 => {
                let (repr, newtype) = self.typedef_of(n)?;
                let inner = self.decode_ddp(repr, depth + 1)?;
                if newtype {
                    let t = type_name(n);
                    quote!(#t(#inner))
                } else {
                    inner
                }
            }
            _ => return None,
        })
    }
}

/// How many DDP-eligible items a value of a shape can carry, for `Procedure::RESULT_DDP_ITEMS`
/// (over RPC-over-RDMA the requester provides that many Write chunks, seed 004 section 4.4.5):
/// a marked field is one item whatever its shape (it moves as one chunk), a struct the sum of
/// its fields, a union its largest arm, optional data its target, a fixed-length array `N`
/// times its element. A variable-length array or a linked list counts one element: the count
/// is unbounded, and a responder returns the items beyond the Write chunks provided inline or
/// in the Reply chunk. A type met again through recursion counts nothing more.
pub(super) struct DdpCounter<'a> {
    model: &'a Model,
    /// Types being counted (the recursion guard).
    open: Vec<&'a str>,
}

impl<'a> DdpCounter<'a> {
    pub(super) fn new(model: &'a Model) -> Self {
        DdpCounter {
            model,
            open: Vec::new(),
        }
    }

    /// The count for a shape.
    pub(super) fn repr(&mut self, r: &'a Repr) -> usize {
        match r {
            Repr::Prim(_) | Repr::FixedOpaque(_) | Repr::VarOpaque(_) | Repr::Str(_) => 0,
            Repr::Named(n) | Repr::List(n) | Repr::NonEmptyList(n) => self.named(n),
            Repr::FixedArray(e, n) => self.repr(e).saturating_mul(n.value as usize),
            Repr::VarArray(e, _) | Repr::Optional(e) | Repr::Boxed(e) => self.repr(e),
        }
    }

    fn field(&mut self, f: &'a Field) -> usize {
        if Gen::is_ddp(f) {
            1
        } else {
            self.repr(&f.repr)
        }
    }

    fn named(&mut self, name: &'a str) -> usize {
        if self.open.contains(&name) {
            return 0;
        }
        let Some(item) = self.model.get(name) else {
            return 0;
        };
        self.open.push(name);
        let n = match &item.kind {
            ItemKind::Struct { fields, .. } => fields
                .iter()
                .fold(0usize, |acc, f| acc.saturating_add(self.field(f))),
            ItemKind::Union(u) => u
                .arms
                .iter()
                .chain(u.default.iter())
                .map(|arm| match &arm.payload {
                    Payload::Void => 0,
                    Payload::One(f) => self.field(f),
                    Payload::Many(fs) => fs
                        .iter()
                        .fold(0usize, |acc, f| acc.saturating_add(self.field(f))),
                })
                .max()
                .unwrap_or(0),
            ItemKind::Typedef { repr, .. } => self.repr(repr),
            _ => 0,
        };
        self.open.pop();
        n
    }
}
