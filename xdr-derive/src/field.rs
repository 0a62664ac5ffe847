//! How one field is written, read and sized: the only place that maps a field's shape and
//! attributes to calls into the runtime.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use crate::internals::ast::{Field, Shape};

/// Statements that encode the field whose `&T` is `value`.
pub fn encode(krate: &syn::Path, field: &Field<'_>, value: &TokenStream) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let ty = field.ty;
    let max = max_expr(field);
    let span = ty.span();
    if field.attrs.ddp.is_set() {
        if let Some(tokens) = encode_ddp(field.shape, field, value, &max) {
            return tokens;
        }
    }
    match (
        field.shape,
        field.attrs.fixed.get(),
        field.attrs.list.is_set(),
    ) {
        (Shape::Bytes, Some(n), _) => {
            quote_spanned!(span=> __enc.put_fixed_opaque(#value, (#n) as usize)?;)
        }
        (Shape::Bytes, None, _) => quote_spanned!(span=> __enc.put_opaque(#value, #max)?;),
        (Shape::XdrString, _, _) => quote_spanned!(span=> __enc.put_string(#value, #max)?;),
        (Shape::Vec(_), _, true) => quote_spanned!(span=> #xdr::encode_list(__enc, #value)?;),
        (Shape::Vec(_), Some(n), _) => {
            quote_spanned!(span=> #xdr::encode_fixed_array(__enc, #value, (#n) as usize)?;)
        }
        (Shape::Vec(_), None, _) => {
            quote_spanned!(span=> #xdr::encode_array(__enc, #value, #max)?;)
        }
        _ => quote_spanned!(span=> <#ty as #xdr::Encode>::encode(#value, __enc)?;),
    }
}

/// DDP-eligible items go through the chunk-aware calls, which encode exactly like the plain
/// ones unless the encoder has a chunking policy (seed 004 section 4.4). `None` for shapes that
/// stay plain (fixed-length arrays, lists).
fn encode_ddp(
    shape: Shape<'_>,
    field: &Field<'_>,
    value: &TokenStream,
    max: &TokenStream,
) -> Option<TokenStream> {
    let span = field.ty.span();
    let fixed = field.attrs.fixed.get();
    Some(match (shape, fixed) {
        (Shape::Bytes, Some(n)) => {
            quote_spanned!(span=> __enc.put_ddp_fixed_opaque(#value, (#n) as usize)?;)
        }
        (Shape::Bytes, None) => quote_spanned!(span=> __enc.put_ddp_opaque(#value, #max)?;),
        (Shape::XdrString, _) => quote_spanned!(span=> __enc.put_ddp_string(#value, #max)?;),
        (Shape::Vec(_), None) if !field.attrs.list.is_set() => {
            quote_spanned!(span=> __enc.put_ddp_array(#value, #max)?;)
        }
        // Seed 004 section 4.4.3.2: the "is present" flag stays inline, the data may move.
        (Shape::Option(inner), _) => {
            let inner_value = quote!(__inner);
            let put = encode_ddp(Shape::of(inner), field, &inner_value, max)?;
            quote_spanned! {span=>
                match #value {
                    ::core::option::Option::Some(__inner) => { __enc.put_bool(true); #put }
                    ::core::option::Option::None => __enc.put_bool(false),
                }
            }
        }
        _ => return None,
    })
}

/// The decoding counterpart of [`encode_ddp`].
fn decode_ddp(shape: Shape<'_>, field: &Field<'_>, max: &TokenStream) -> Option<TokenStream> {
    let span = field.ty.span();
    Some(match (shape, field.attrs.fixed.get()) {
        (Shape::Bytes, Some(n)) => {
            quote_spanned!(span=> __dec.get_ddp_fixed_opaque((#n) as usize)?)
        }
        (Shape::Bytes, None) => quote_spanned!(span=> __dec.get_ddp_opaque(#max)?),
        (Shape::XdrString, _) => quote_spanned!(span=> __dec.get_ddp_string(#max)?),
        (Shape::Vec(_), None) if !field.attrs.list.is_set() => {
            quote_spanned!(span=> __dec.get_ddp_array(#max)?)
        }
        (Shape::Option(inner), _) => {
            let get = decode_ddp(Shape::of(inner), field, max)?;
            quote_spanned! {span=>
                if __dec.get_present()? { ::core::option::Option::Some(#get) } else { ::core::option::Option::None }
            }
        }
        _ => return None,
    })
}

/// An expression that decodes the field from `__dec`.
pub fn decode(krate: &syn::Path, field: &Field<'_>) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let ty = field.ty;
    let max = max_expr(field);
    let span = ty.span();
    if field.attrs.ddp.is_set() {
        if let Some(tokens) = decode_ddp(field.shape, field, &max) {
            return tokens;
        }
    }
    match (
        field.shape,
        field.attrs.fixed.get(),
        field.attrs.list.is_set(),
    ) {
        (Shape::Bytes, Some(n), _) => quote_spanned!(span=> __dec.get_fixed_opaque((#n) as usize)?),
        (Shape::Bytes, None, _) => quote_spanned!(span=> __dec.get_opaque(#max)?),
        (Shape::XdrString, _, _) => quote_spanned!(span=> __dec.get_string(#max)?),
        (Shape::Vec(_), _, true) => quote_spanned!(span=> #xdr::decode_list(__dec)?),
        (Shape::Vec(_), Some(n), _) => {
            quote_spanned!(span=> #xdr::decode_fixed_array(__dec, (#n) as usize)?)
        }
        (Shape::Vec(_), None, _) => quote_spanned!(span=> #xdr::decode_array(__dec, #max)?),
        _ => quote_spanned!(span=> <#ty as #xdr::Decode>::decode(__dec)?),
    }
}

/// A statement that decodes the field from `__dec` over `self`'s old value, reusing its
/// vectors; shapes with nothing to reuse (opaque data, strings, fixed arrays, DDP-eligible
/// fields) are assigned a fresh decode.
pub fn decode_in_place(krate: &syn::Path, field: &Field<'_>) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let ty = field.ty;
    let member = &field.member;
    let span = ty.span();
    let fresh = || {
        let e = decode(krate, field);
        quote_spanned!(span=> self.#member = #e;)
    };
    if field.attrs.ddp.is_set() {
        return fresh();
    }
    match (
        field.shape,
        field.attrs.fixed.get(),
        field.attrs.list.is_set(),
    ) {
        (Shape::Bytes | Shape::XdrString, _, _) | (Shape::Vec(_), Some(_), false) => fresh(),
        (Shape::Vec(_), _, true) => {
            quote_spanned!(span=> #xdr::decode_list_in_place(__dec, &mut self.#member)?;)
        }
        (Shape::Vec(_), None, false) => {
            let max = max_expr(field);
            quote_spanned!(span=> #xdr::decode_array_in_place(__dec, &mut self.#member, #max)?;)
        }
        _ => {
            quote_spanned!(span=> <#ty as #xdr::Decode>::decode_in_place(&mut self.#member, __dec)?;)
        }
    }
}

/// A constant expression for the fewest bytes the field takes on the wire. It never
/// overestimates: decoders use it to refuse counts the input cannot hold.
pub fn min_len(krate: &syn::Path, field: &Field<'_>) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let ty = field.ty;
    match (field.shape, field.attrs.fixed.get()) {
        (Shape::Bytes, Some(n)) => {
            quote!(((#n) as usize + #xdr::padding((#n) as usize)))
        }
        (Shape::Vec(elem), Some(n)) => {
            quote!(((#n) as usize * <#elem as #xdr::Decode>::MIN_ENCODED_LEN))
        }
        // A length, count, "is present" flag or end-of-list flag: one 4-byte unit. Written out
        // rather than asked of the type, so self-referential types need no cyclic constant.
        (Shape::Bytes | Shape::XdrString | Shape::Vec(_) | Shape::Option(_), None) => {
            quote!(#xdr::BLOCK)
        }
        // Boxes carry recursion; asking the boxed type could form a cycle of constants, so
        // count nothing (a safe lower bound).
        (Shape::Box, _) => quote!(0usize),
        _ => quote!(<#ty as #xdr::Decode>::MIN_ENCODED_LEN),
    }
}

/// Which constant of `EncodedSize` a size expression computes.
#[derive(Copy, Clone, PartialEq, Eq)]
pub enum Extent {
    /// `MAX_LEN`: the whole encoding, every item inline.
    Whole,
    /// `MAX_INLINE_LEN`: what stays inline once every DDP-eligible item has moved to a chunk.
    Inline,
}

/// A constant expression of type `Option<usize>` for the most bytes the field can take
/// (`None`: unbounded), for `extent`. `container` is the type being derived, to spot
/// recursion.
pub fn max_len(
    krate: &syn::Path,
    field: &Field<'_>,
    container: &syn::Ident,
    extent: Extent,
) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let bounds = quote!(#xdr::bounds);
    let none = quote!(::core::option::Option::None);
    // Boxes and self-references carry recursion: the encoding has no upper bound, and asking
    // the boxed or own type would form a cycle of constants (as for `min_len`).
    if may_recurse(field.ty, container) {
        return none;
    }
    let span = field.ty.span();
    if extent == Extent::Inline && field.attrs.ddp.is_set() {
        if let Some(left) = moved_len(&xdr, field.shape, field) {
            return left;
        }
    }
    let konst = match extent {
        Extent::Whole => quote!(MAX_LEN),
        Extent::Inline => quote!(MAX_INLINE_LEN),
    };
    let max = max_expr(field);
    let ty = field.ty;
    match (
        field.shape,
        field.attrs.fixed.get(),
        field.attrs.list.is_set(),
    ) {
        (Shape::Bytes, Some(n), _) => quote_spanned! {span=>
            ::core::option::Option::Some((#n) as usize + #xdr::padding((#n) as usize))
        },
        (Shape::Bytes | Shape::XdrString, None, _) => quote_spanned!(span=> #bounds::opaque(#max)),
        // RFC 4506 section 4.19: a linked list has no declared maximum.
        (Shape::Vec(_), _, true) => none,
        (Shape::Vec(elem), Some(n), _) => quote_spanned! {span=>
            #bounds::mul((#n) as usize, <#elem as #xdr::EncodedSize>::#konst)
        },
        (Shape::Vec(elem), None, _) => quote_spanned! {span=>
            #bounds::array(#max, <#elem as #xdr::EncodedSize>::#konst)
        },
        (Shape::Box, _, _) => none,
        _ => quote_spanned!(span=> <#ty as #xdr::EncodedSize>::#konst),
    }
}

/// What stays inline of a DDP-eligible item once it has moved to a chunk, for the shapes
/// [`encode_ddp`] moves (`None` for those it encodes inline): a variable-length item leaves
/// its length or count (seed 004 section 4.4.3.1), a fixed-length one nothing, optional data
/// its "is present" flag plus what its item leaves (section 4.4.3.2).
fn moved_len(xdr: &TokenStream, shape: Shape<'_>, field: &Field<'_>) -> Option<TokenStream> {
    let some = |n: TokenStream| quote!(::core::option::Option::Some(#n));
    Some(match (shape, field.attrs.fixed.get()) {
        (Shape::Bytes, Some(_)) => some(quote!(0usize)),
        (Shape::Bytes | Shape::XdrString, None) => some(quote!(#xdr::BLOCK)),
        (Shape::Vec(_), None) if !field.attrs.list.is_set() => some(quote!(#xdr::BLOCK)),
        (Shape::Option(inner), _) => {
            let left = moved_len(xdr, Shape::of(inner), field)?;
            quote!(#xdr::bounds::add(::core::option::Option::Some(#xdr::BLOCK), #left))
        }
        _ => return None,
    })
}

/// Whether `ty` names `Box`, `Self` or the container itself anywhere: the only ways a derived
/// type can contain itself. A false alarm only makes the bound `None` (unbounded), never wrong.
fn may_recurse(ty: &syn::Type, container: &syn::Ident) -> bool {
    fn walk(tokens: TokenStream, container: &syn::Ident) -> bool {
        tokens.into_iter().any(|tree| match tree {
            proc_macro2::TokenTree::Ident(id) => id == "Box" || id == "Self" || id == *container,
            proc_macro2::TokenTree::Group(g) => walk(g.stream(), container),
            _ => false,
        })
    }
    walk(quote!(#ty), container)
}

fn max_expr(field: &Field<'_>) -> TokenStream {
    match field.attrs.max.get() {
        Some(n) => quote_spanned!(n.span()=> ::core::option::Option::Some((#n) as u32)),
        None => quote!(::core::option::Option::None),
    }
}
