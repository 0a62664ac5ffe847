//! Emits `impl EncodedSize`: the largest encoding, inline and with DDP-eligible items moved to
//! chunks, so a requester can decide on a Reply chunk before it sends (seed 002 sections 4.1
//! and 4.3). The same numbers `xdrgen` computes for generated types.

use proc_macro2::TokenStream;
use quote::quote;

use crate::bound::with_bound;
use crate::field::{self, Extent};
use crate::internals::ast::{Arm, Container, Data, Field};
use crate::krate;

/// The `EncodedSize` impl for `cont`.
pub fn expand(cont: &Container<'_>) -> TokenStream {
    let krate = krate(cont);
    let xdr = quote!(#krate::xdr);
    let ident = cont.ident;
    let generics = with_bound(cont.generics, &quote!(#xdr::EncodedSize));
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let bound = |extent| match &cont.data {
        Data::Struct(fields) => sum(cont, &krate, fields.iter(), extent),
        // RFC 4506 section 4.3: a signed 32-bit value.
        Data::Enum(_) => quote!(::core::option::Option::Some(4usize)),
        Data::Union(arms) => union(cont, &krate, arms, extent),
    };
    let max = bound(Extent::Whole);
    let inline = bound(Extent::Inline);
    // Nothing can move (no `ddp` mark, no field that may hold one): keep the trait's default,
    // `MAX_INLINE_LEN = MAX_LEN`.
    let inline = (inline.to_string() != max.to_string())
        .then(|| quote!(const MAX_INLINE_LEN: ::core::option::Option<usize> = #inline;));
    quote! {
        #[automatically_derived]
        impl #impl_generics #xdr::EncodedSize for #ident #ty_generics #where_clause {
            const MAX_LEN: ::core::option::Option<usize> = #max;
            #inline
        }
    }
}

/// RFC 4506 section 4.14: a struct (or union arm) is its fields one after the other.
fn sum<'a>(
    cont: &Container<'_>,
    krate: &syn::Path,
    fields: impl Iterator<Item = &'a Field<'a>>,
    extent: Extent,
) -> TokenStream {
    let parts = fields.map(|f| field::max_len(krate, f, cont.ident, extent));
    quote! {{
        let __n = ::core::option::Option::Some(0usize);
        #(let __n = #krate::xdr::bounds::add(__n, #parts);)*
        __n
    }}
}

/// RFC 4506 section 4.15: the discriminant (an int, unsigned int, enum or bool: 4 bytes), then
/// the largest arm; a `void` arm counts 0, the default arm counts like any other. A field
/// holding the discriminant is that same value, not another item.
fn union(cont: &Container<'_>, krate: &syn::Path, arms: &[Arm<'_>], extent: Extent) -> TokenStream {
    let bounds = quote!(#krate::xdr::bounds);
    let arm_lens = arms.iter().map(|arm| {
        sum(
            cont,
            krate,
            arm.fields.iter().filter(|f| !f.attrs.discriminant.is_set()),
            extent,
        )
    });
    quote! {{
        let __arm = ::core::option::Option::Some(0usize);
        #(let __arm = #bounds::max(__arm, #arm_lens);)*
        #bounds::add(::core::option::Option::Some(4usize), __arm)
    }}
}
