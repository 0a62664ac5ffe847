//! Emits `impl Encode`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::bound::with_bound;
use crate::field;
use crate::internals::ast::{Arm, Constant, Container, Data, Field};
use crate::{krate, switch_type};

/// The `Encode` impl for `cont`.
pub fn expand(cont: &Container<'_>) -> TokenStream {
    let krate = krate(cont);
    let xdr = quote!(#krate::xdr);
    let ident = cont.ident;
    let generics = with_bound(cont.generics, &quote!(#xdr::Encode));
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let body = match &cont.data {
        Data::Struct(fields) => encode_struct(&krate, fields),
        Data::Enum(constants) => encode_enum(constants),
        Data::Union(arms) => encode_union(cont, &krate, arms),
    };
    quote! {
        #[automatically_derived]
        impl #impl_generics #xdr::Encode for #ident #ty_generics #where_clause {
            fn encode(&self, __enc: &mut #xdr::Encoder) -> #xdr::Result<()> {
                #body
                ::core::result::Result::Ok(())
            }
        }
    }
}

/// RFC 4506 section 4.14: the fields in the order they are declared.
fn encode_struct(krate: &syn::Path, fields: &[Field<'_>]) -> TokenStream {
    let steps = fields.iter().map(|f| {
        let member = &f.member;
        field::encode(krate, f, &quote!(&self.#member))
    });
    quote!(#(#steps)*)
}

/// RFC 4506 section 4.3: an enum is encoded as its signed 32-bit value.
fn encode_enum(constants: &[Constant<'_>]) -> TokenStream {
    let arms = constants.iter().map(|c| {
        let id = c.ident;
        quote!(Self::#id => Self::#id as i32,)
    });
    quote! {
        __enc.put_i32(match self { #(#arms)* });
    }
}

/// RFC 4506 section 4.15: the discriminant, then the arm it selects.
fn encode_union(cont: &Container<'_>, krate: &syn::Path, arms: &[Arm<'_>]) -> TokenStream {
    let xdr = quote!(#krate::xdr);
    let switch = switch_type(cont);
    let name = cont.ident.to_string();
    let every_case: Vec<&syn::Expr> = arms
        .iter()
        .flat_map(|a| a.attrs.cases.iter().map(|(_, e)| e))
        .collect();
    let match_arms = arms.iter().map(|arm| {
        let variant = arm.ident;
        let bindings: Vec<syn::Ident> = (0..arm.fields.len())
            .map(|i| format_ident!("__f{}", i))
            .collect();
        let members = arm.fields.iter().map(|f| &f.member);
        let cases: Vec<&syn::Expr> = arm.attrs.cases.iter().map(|(_, e)| e).collect();
        let discriminant = match arm.discriminant_field() {
            None => {
                let first = cases[0];
                quote_spanned! {first.span()=>
                    let __d: #switch = #first;
                    #xdr::Encode::encode(&__d, __enc)?;
                }
            }
            Some((i, f)) => {
                let held = &bindings[i];
                let ty = f.ty;
                // The value held must select this arm again when decoded.
                let guard = if arm.is_default() {
                    let msg = format!(
                        "the discriminant held by the default arm {name}::{variant} selects another arm"
                    );
                    if every_case.is_empty() {
                        quote!()
                    } else {
                        quote! {
                            match *#held {
                                #(#every_case)|* => return ::core::result::Result::Err(
                                    __enc.error(#xdr::ErrorKind::Invalid(#msg))),
                                #[allow(unreachable_patterns)]
                                _ => {}
                            }
                        }
                    }
                } else {
                    let msg = format!(
                        "the discriminant held by {name}::{variant} is not one of its cases"
                    );
                    quote! {
                        match *#held {
                            #(#cases)|* => {}
                            #[allow(unreachable_patterns)]
                            _ => return ::core::result::Result::Err(
                                __enc.error(#xdr::ErrorKind::Invalid(#msg))),
                        }
                    }
                };
                // A field of the wrong type is reported at the field, not at the derive.
                let mut at_field = held.clone();
                at_field.set_span(ty.span());
                let typed = quote!(let _: &#switch = #at_field;);
                quote! {
                    #typed
                    #guard
                    #xdr::Encode::encode(#held, __enc)?;
                }
            }
        };
        let steps = arm
            .fields
            .iter()
            .zip(&bindings)
            .filter(|(f, _)| !f.attrs.discriminant.is_set())
            .map(|(f, b)| field::encode(krate, f, &quote!(#b)));
        quote! {
            Self::#variant { #(#members: #bindings),* } => {
                #discriminant
                #(#steps)*
            }
        }
    });
    quote! {
        match self { #(#match_arms)* }
    }
}
