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
