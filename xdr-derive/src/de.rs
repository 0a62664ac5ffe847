//! Emits `impl Decode`, with `MIN_ENCODED_LEN`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;

use crate::bound::with_bound;
use crate::field;
use crate::internals::ast::{Arm, Constant, Container, Data, Field};
use crate::{krate, switch_type};

/// The `Decode` impl for `cont`.
pub fn expand(cont: &Container<'_>) -> TokenStream {
    let krate = krate(cont);
    let xdr = quote!(#krate::xdr);
    let ident = cont.ident;
    let generics = with_bound(cont.generics, &quote!(#xdr::Decode));
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let (min_len, body) = match &cont.data {
        Data::Struct(fields) => (
            sum_min_len(&krate, fields.iter()),
            decode_fields(&krate, quote!(Self), fields),
        ),
        Data::Enum(constants) => (quote!(4usize), decode_enum(cont, &krate, constants)),
        Data::Union(arms) => union_parts(cont, &krate, arms),
    };
    let in_place = match &cont.data {
        Data::Struct(fields) => decode_fields_in_place(&krate, fields),
        // Enums are `Copy`-like; unions keep the default (a fresh decode).
        Data::Enum(_) | Data::Union(_) => TokenStream::new(),
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics #xdr::Decode for #ident #ty_generics #where_clause {
            const MIN_ENCODED_LEN: usize = #min_len;

            #[deny(unreachable_patterns)]
            fn decode(__dec: &mut #xdr::Decoder) -> #xdr::Result<Self> {
                #body
            }

            #in_place
        }
    }
}

/// `decode_in_place` for a struct: each field decoded over the old one, reusing what it owns.
fn decode_fields_in_place(krate: &syn::Path, fields: &[Field<'_>]) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let stmts = fields.iter().map(|f| field::decode_in_place(krate, f));
    quote! {
        fn decode_in_place(&mut self, __dec: &mut #xdr::Decoder) -> #xdr::Result<()> {
            #(#stmts)*
            ::core::result::Result::Ok(())
        }
    }
}

fn sum_min_len<'a>(krate: &syn::Path, fields: impl Iterator<Item = &'a Field<'a>>) -> TokenStream {
    let parts = fields.map(|f| field::min_len(krate, f));
    quote!(0usize #(+ #parts)*)
}

/// Reads the fields in order and builds `path { .. }` (braces work for every struct and
/// variant style: `Self { 0: a }` is a tuple struct, `Self {}` a unit).
fn decode_fields(krate: &syn::Path, path: TokenStream, fields: &[Field<'_>]) -> TokenStream {
    let bindings: Vec<syn::Ident> = (0..fields.len())
        .map(|i| format_ident!("__f{}", i))
        .collect();
    let reads = fields.iter().map(|f| field::decode(krate, f));
    let members = fields.iter().map(|f| &f.member);
    quote! {
        #(let #bindings = #reads;)*
        ::core::result::Result::Ok(#path { #(#members: #bindings),* })
    }
}

fn unknown(xdr: &TokenStream, name: &str, value: TokenStream) -> TokenStream {
    quote! {
        ::core::result::Result::Err(#xdr::Error::new(
            #xdr::ErrorKind::UnknownDiscriminant { type_name: #name, value: #value },
            __at,
        ))
    }
}

/// RFC 4506 section 4.3: only the declared values are valid.
fn decode_enum(cont: &Container<'_>, krate: &syn::Path, constants: &[Constant<'_>]) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let ident = cont.ident;
    let consts: Vec<syn::Ident> = (0..constants.len())
        .map(|i| format_ident!("__XDR_{}", i))
        .collect();
    let variants: Vec<&syn::Ident> = constants.iter().map(|c| c.ident).collect();
    let err = unknown(&xdr, &ident.to_string(), quote!(__v as i64));
    quote! {
        #(const #consts: i32 = #ident::#variants as i32;)*
        let __at = __dec.offset();
        let __v = __dec.get_i32()?;
        match __v {
            #(#consts => ::core::result::Result::Ok(Self::#variants),)*
            _ => #err,
        }
    }
}

/// The discriminant, then the arm it selects; the default arm (wherever it is declared)
/// comes last in the `match`.
fn union_parts(
    cont: &Container<'_>,
    krate: &syn::Path,
    arms: &[Arm<'_>],
) -> (TokenStream, TokenStream) {
    let xdr = quote!(#krate::xdr);
    let switch = switch_type(cont);
    let arm_mins = arms.iter().map(|arm| {
        sum_min_len(
            krate,
            arm.fields.iter().filter(|f| !f.attrs.discriminant.is_set()),
        )
    });
    let min_len = quote! {
        <#switch as #xdr::Decode>::MIN_ENCODED_LEN + {
            let mut __m = usize::MAX;
            #({
                let __a = #arm_mins;
                if __a < __m { __m = __a; }
            })*
            __m
        }
    };

    let case_arms = arms.iter().filter(|a| !a.is_default()).map(|arm| {
        let cases = arm.attrs.cases.iter().map(|(_, e)| e);
        let build = decode_arm(krate, arm);
        if arm.discriminant_field().is_some() {
            quote!(__d @ (#(#cases)|*) => { #build })
        } else {
            quote!(#(#cases)|* => { #build })
        }
    });
    let (at, fallback) = match arms.iter().find(|a| a.is_default()) {
        Some(arm) => {
            let build = decode_arm(krate, arm);
            (
                quote!(),
                quote!(#[allow(unreachable_patterns)] __d => { #build }),
            )
        }
        None => {
            let err = unknown(&xdr, &cont.ident.to_string(), quote!(__d as i64));
            (
                quote!(let __at = __dec.offset();),
                quote!(#[allow(unreachable_patterns)] _ => #err,),
            )
        }
    };
    let body = quote! {
        #at
        let __d: #switch = #xdr::Decode::decode(__dec)?;
        match __d {
            #(#case_arms)*
            #fallback
        }
    };
    (min_len, body)
}

/// Builds `Self::Variant { .. }`, with the discriminant field (if any) set to `__d`.
fn decode_arm(krate: &syn::Path, arm: &Arm<'_>) -> TokenStream {
    let variant = arm.ident;
    let bindings: Vec<syn::Ident> = arm
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| format_ident!("__f{}", i, span = f.ty.span()))
        .collect();
    let reads = arm.fields.iter().map(|f| {
        if f.attrs.discriminant.is_set() {
            // Spanned at the field so a type mismatch with the switch type points there.
            let d = syn::Ident::new("__d", f.ty.span());
            quote!(#d)
        } else {
            field::decode(krate, f)
        }
    });
    let members = arm.fields.iter().map(|f| &f.member);
    quote! {
        #(let #bindings = #reads;)*
        ::core::result::Result::Ok(Self::#variant { #(#members: #bindings),* })
    }
}
