//! Emits `impl DdpEligible`: the names of the fields an Upper Layer Binding lets move as
//! RDMA chunks (RFC 8166 section 6.1).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use crate::bound::with_bound;

use crate::internals::ast::{Container, Data};
use crate::internals::Ctxt;
use crate::krate;

/// The `DdpEligible` impl for `cont`, or an error for an XDR enum (which has no fields).
pub fn expand(cx: &Ctxt, cont: &Container<'_>) -> TokenStream {
    let names: Vec<String> = match &cont.data {
        Data::Struct(fields) => fields
            .iter()
            .filter(|f| f.attrs.ddp.is_set())
            .map(|f| f.name())
            .collect(),
        // RFC 8166 section 4.4.3.2: a union is never DDP-eligible, but its arms may be.
        Data::Union(arms) => arms
            .iter()
            .flat_map(|arm| {
                arm.fields
                    .iter()
                    .filter(|f| f.attrs.ddp.is_set())
                    .map(move |f| format!("{}.{}", arm.ident, f.name()))
            })
            .collect(),
        Data::Enum(_) => {
            cx.ddp_error_spanned_by(
                cont.ident,
                "an XDR enum is a single integer and has nothing DDP can move; derive \
                 DdpEligible on the structs and unions that carry opaque, string or array fields",
            );
            return quote!();
        }
    };
    let krate = krate(cont);
    let ident = cont.ident;
    let (impl_generics, ty_generics, where_clause) = cont.generics.split_for_impl();
    // DDP-eligibility is a property of an XDR type: require `Encode` (normally from
    // `#[derive(Xdr)]`, which also checks every rule but the DDP ones).
    let bounded = with_bound(cont.generics, &quote!(#krate::xdr::Encode));
    let (check_generics, _, check_where) = bounded.split_for_impl();
    let requires = quote_spanned! {ident.span()=>
        #[diagnostic::on_unimplemented(
            message = "`{Self}` derives DdpEligible but does not implement Encode",
            label = "add #[derive(Xdr)] to this type",
            note = "DDP-eligibility marks fields of an XDR type (RFC 8166 section 6.1)"
        )]
        trait DeriveXdrToo {}
        impl<T: ?::core::marker::Sized + #krate::xdr::Encode> DeriveXdrToo for T {}
        fn __requires_encode #check_generics () #check_where {
            fn is_xdr<T: ?::core::marker::Sized + DeriveXdrToo>() {}
            is_xdr::<#ident #ty_generics>();
        }
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::xdr::DdpEligible for #ident #ty_generics #where_clause {
            const DDP_FIELDS: &'static [&'static str] = &[#(#names),*];
        }
        #requires
    }
}
