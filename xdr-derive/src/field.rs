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

fn max_expr(field: &Field<'_>) -> TokenStream {
    match field.attrs.max.get() {
        Some(n) => quote_spanned!(n.span()=> ::core::option::Option::Some((#n) as u32)),
        None => quote!(::core::option::Option::None),
    }
}
