//! Shapes: the Rust type of each XDR declaration and the code that encodes and decodes it.

use proc_macro2::TokenStream;
use quote::quote;

use super::ident::{const_name, type_name};
use super::{lit_u32, lit_usize, padding, prim_type, Gen};
use crate::ir::*;

impl Gen<'_> {
    pub(super) fn rust_type(&self, r: &Repr) -> TokenStream {
        let rt = &self.rt;
        match r {
            Repr::Prim(p) => prim_type(*p),
            Repr::Named(n) => {
                let i = type_name(n);
                let p = &self.prefix;
                quote!(#p #i)
            }
            Repr::FixedOpaque(_) | Repr::VarOpaque(_) => quote!(#rt::Bytes),
            Repr::Str(_) => quote!(#rt::XdrString),
            Repr::FixedArray(e, n) if n.value > MAX_INLINE_ARRAY => {
                let t = self.rust_type(e);
                quote!(::std::vec::Vec<#t>)
            }
            Repr::FixedArray(e, n) => {
                let t = self.rust_type(e);
                let n = lit_usize(n.value as usize);
                quote!([#t; #n])
            }
            Repr::VarArray(e, _) => {
                let t = self.rust_type(e);
                quote!(::std::vec::Vec<#t>)
            }
            Repr::Optional(e) => {
                let t = self.rust_type(e);
                quote!(::core::option::Option<#t>)
            }
            Repr::Boxed(e) => {
                let t = self.rust_type(e);
                quote!(::std::boxed::Box<#t>)
            }
            Repr::List(n) | Repr::NonEmptyList(n) => {
                let t = self.list_element_name(n);
                let p = &self.prefix;
                quote!(::std::vec::Vec<#p #t>)
            }
        }
    }

    pub(super) fn max(&self, s: &Option<Size>) -> TokenStream {
        match s {
            None => quote!(::core::option::Option::None),
            Some(s) => {
                let v = self.size_u32(s);
                quote!(::core::option::Option::Some(#v))
            }
        }
    }

    /// A size as a `u32` expression: the constant's name when it is a `u32` constant.
    pub(super) fn size_u32(&self, s: &Size) -> TokenStream {
        if let Some(n) = &s.name {
            if let Some(ItemKind::Const { ty: Prim::UInt, .. }) = self.model.get(n).map(|i| &i.kind)
            {
                let c = const_name(n);
                return quote!(#c);
            }
        }
        let v = lit_u32(s.value);
        quote!(#v)
    }

    pub(super) fn min_expr(&self, r: &Repr) -> TokenStream {
        let rt = &self.rt;
        if r.is_natural() {
            let t = self.rust_type(r);
            return quote!(<#t as #rt::Decode>::MIN_ENCODED_LEN);
        }
        match r {
            Repr::FixedOpaque(s) => {
                let n = lit_usize((s.value as usize).saturating_add(padding(s.value as usize)));
                quote!(#n)
            }
            Repr::NonEmptyList(n) => {
                let t = type_name(n);
                quote!(<#t as #rt::Decode>::MIN_ENCODED_LEN + 4)
            }
            Repr::FixedArray(e, n) => {
                let m = self.min_expr(e);
                let n = lit_usize(n.value as usize);
                quote!((#m).saturating_mul(#n))
            }
            Repr::Boxed(e) => self.min_expr(e),
            _ => quote!(4),
        }
    }

    /// Statements encoding `expr` (a reference to the value) as shape `r`.
    pub(super) fn encode(&self, r: &Repr, expr: TokenStream) -> TokenStream {
        let rt = &self.rt;
        if r.is_natural() {
            return quote!(#rt::Encode::encode(#expr, enc)?;);
        }
        match r {
            Repr::FixedOpaque(s) => {
                let n = lit_usize(s.value as usize);
                quote!(enc.put_fixed_opaque(#expr, #n)?;)
            }
            Repr::VarOpaque(m) => {
                let m = self.max(m);
                quote!(enc.put_opaque(#expr, #m)?;)
            }
            Repr::Str(m) => {
                let m = self.max(m);
                quote!(enc.put_string(#expr, #m)?;)
            }
            Repr::VarArray(e, m) => {
                let m = self.max(m);
                if e.is_natural() {
                    quote!(#rt::encode_array(enc, #expr, #m)?;)
                } else {
                    let inner = self.encode(e, quote!(item));
                    quote! {
                        {
                            let items = #expr;
                            enc.put_length(items.len(), #m)?;
                            for item in items.iter() { #inner }
                        }
                    }
                }
            }
            Repr::FixedArray(e, n) if n.value > MAX_INLINE_ARRAY => {
                let nl = lit_usize(n.value as usize);
                if e.is_natural() {
                    quote!(#rt::encode_fixed_array(enc, #expr, #nl)?;)
                } else {
                    let inner = self.encode(e, quote!(item));
                    quote! {
                        {
                            let items = #expr;
                            if items.len() != #nl {
                                return ::core::result::Result::Err(enc.error(#rt::ErrorKind::WrongFixedLength {
                                    expected: #nl,
                                    actual: items.len(),
                                }));
                            }
                            for item in items.iter() { #inner }
                        }
                    }
                }
            }
            Repr::FixedArray(e, _) => {
                let inner = self.encode(e, quote!(item));
                quote!(for item in (#expr).iter() { #inner })
            }
            Repr::Optional(e) => {
                let inner = self.encode(e, quote!(item));
                quote! {
                    match #expr {
                        ::core::option::Option::Some(item) => { enc.put_bool(true); #inner }
                        ::core::option::Option::None => enc.put_bool(false),
                    }
                }
            }
            Repr::Boxed(e) => self.encode(e, quote!(&**(#expr))),
            Repr::List(_) => quote!(#rt::encode_list(enc, #expr)?;),
            Repr::NonEmptyList(n) => quote!(#rt::encode_nonempty_list(enc, #expr, #n)?;),
            Repr::Prim(_) | Repr::Named(_) => quote!(#rt::Encode::encode(#expr, enc)?;),
        }
    }

    /// Whether a value of shape `r` owns heap memory that decoding in place can reuse
    /// (vectors, boxes, and the structs and unions that may hold them).
    pub(super) fn owns_heap(&self, r: &Repr) -> bool {
        match r {
            Repr::Prim(_) | Repr::FixedOpaque(_) | Repr::VarOpaque(_) | Repr::Str(_) => false,
            Repr::VarArray(..) | Repr::Boxed(_) | Repr::List(_) | Repr::NonEmptyList(_) => true,
            Repr::FixedArray(e, _) | Repr::Optional(e) => self.owns_heap(e),
            Repr::Named(n) => {
                match self.model.get(n) {
                    None => false,
                    // A recursive type holds a box or a vector somewhere in its cycle.
                    Some(item) if item.props.recursive => true,
                    Some(item) => match &item.kind {
                        ItemKind::Typedef { repr, .. } => self.owns_heap(repr),
                        ItemKind::Struct { fields, .. } => {
                            fields.iter().any(|f| self.owns_heap(&f.repr))
                        }
                        ItemKind::Union(u) => u.arms.iter().chain(&u.default).any(|arm| match &arm
                            .payload
                        {
                            Payload::Void => false,
                            Payload::One(f) => self.owns_heap(&f.repr),
                            Payload::Many(fs) => fs.iter().any(|f| self.owns_heap(&f.repr)),
                        }),
                        _ => false,
                    },
                }
            }
        }
    }

    /// A statement decoding shape `r` into `place` (a `&mut` expression) while reusing what it
    /// owns ([`Decode::decode_in_place`](rpcrdma::xdr::Decode::decode_in_place)); `None` when
    /// the shape owns nothing reusable or has no in-place form, and the caller assigns a fresh
    /// decode instead.
    pub(super) fn decode_in_place(&self, r: &Repr, place: TokenStream) -> Option<TokenStream> {
        let rt = &self.rt;
        if !self.owns_heap(r) {
            return None;
        }
        match r {
            Repr::List(_) => Some(quote!(#rt::decode_list_in_place(dec, #place)?;)),
            Repr::NonEmptyList(_) => {
                Some(quote!(#rt::decode_nonempty_list_in_place(dec, #place)?;))
            }
            Repr::VarArray(e, m) if e.is_natural() => {
                let mx = self.max(m);
                Some(quote!(#rt::decode_array_in_place(dec, #place, #mx)?;))
            }
            _ if r.is_natural() => Some(quote!(#rt::Decode::decode_in_place(#place, dec)?;)),
            _ => None,
        }
    }

    /// An expression decoding shape `r` (uses `?`).
    pub(super) fn decode(&self, r: &Repr) -> TokenStream {
        let rt = &self.rt;
        if r.is_natural() {
            let t = self.rust_type(r);
            return quote!(<#t as #rt::Decode>::decode(dec)?);
        }
        match r {
            Repr::FixedOpaque(s) => {
                let n = lit_usize(s.value as usize);
                quote!(dec.get_fixed_opaque(#n)?)
            }
            Repr::VarOpaque(m) => {
                let m = self.max(m);
                quote!(dec.get_opaque(#m)?)
            }
            Repr::Str(m) => {
                let m = self.max(m);
                quote!(dec.get_string(#m)?)
            }
            Repr::VarArray(e, m) => {
                let mx = self.max(m);
                if e.is_natural() {
                    quote!(#rt::decode_array(dec, #mx)?)
                } else {
                    let inner = self.decode(e);
                    let min = self.min_expr(e);
                    quote! {
                        {
                            let count = dec.get_count(#mx, #min)?;
                            let mut items = ::std::vec::Vec::with_capacity(count.min(1024));
                            for _ in 0..count { items.push(#inner); }
                            items
                        }
                    }
                }
            }
            Repr::FixedArray(e, n) if n.value > MAX_INLINE_ARRAY && e.is_natural() => {
                let nl = lit_usize(n.value as usize);
                quote!(#rt::decode_fixed_array(dec, #nl)?)
            }
            Repr::FixedArray(e, n) if n.value > MAX_INLINE_ARRAY => {
                let inner = self.decode(e);
                let min = self.min_expr(e);
                let nl = lit_usize(n.value as usize);
                quote! {
                    {
                        dec.check_count(#nl, #min, dec.offset())?;
                        let mut items = ::std::vec::Vec::with_capacity((#nl as usize).min(1024));
                        for _ in 0..#nl { items.push(#inner); }
                        items
                    }
                }
            }
            Repr::FixedArray(e, n) => {
                let inner = self.decode(e);
                let min = self.min_expr(e);
                let nl = lit_usize(n.value as usize);
                let t = self.rust_type(r);
                quote! {
                    {
                        dec.check_count(#nl, #min, dec.offset())?;
                        let mut items = ::std::vec::Vec::with_capacity((#nl as usize).min(1024));
                        for _ in 0..#nl { items.push(#inner); }
                        <#t>::try_from(items).map_err(|_| dec.error(#rt::ErrorKind::Invalid("fixed array length mismatch")))?
                    }
                }
            }
            Repr::Optional(e) => {
                let inner = self.decode(e);
                quote! {
                    if dec.get_present()? { ::core::option::Option::Some(#inner) } else { ::core::option::Option::None }
                }
            }
            Repr::Boxed(e) => {
                let inner = self.decode(e);
                quote!(::std::boxed::Box::new(#inner))
            }
            Repr::List(_) => quote!(#rt::decode_list(dec)?),
            Repr::NonEmptyList(_) => quote!(#rt::decode_nonempty_list(dec)?),
            Repr::Prim(_) | Repr::Named(_) => {
                let t = self.rust_type(r);
                quote!(<#t as #rt::Decode>::decode(dec)?)
            }
        }
    }
}
