//! Unions: one Rust enum variant per case label, `Default { discriminant, .. }` for `default`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::ident::{field_name, type_name, type_name_str, unique};
use super::{doc, lit_i128, Gen};
use crate::ir::*;

impl Gen<'_> {
    pub(super) fn disc_type(&self, d: &Disc) -> TokenStream {
        match d {
            Disc::Int => quote!(i32),
            Disc::UInt => quote!(u32),
            Disc::Bool => quote!(bool),
            Disc::Enum(e) => {
                let n = type_name(e);
                quote!(#n)
            }
        }
    }

    /// The pattern/expression for a label's discriminant value.
    pub(super) fn label_value(&self, d: &Disc, l: &Label) -> TokenStream {
        match d {
            Disc::Int | Disc::UInt => lit_i128(l.value.into()),
            Disc::Bool => {
                if l.value != 0 {
                    quote!(true)
                } else {
                    quote!(false)
                }
            }
            Disc::Enum(e) => {
                let ty = type_name(e);
                let Some(ItemKind::Enum { members, .. }) = self.model.get(e).map(|i| &i.kind)
                else {
                    return quote!(#ty::from_value(0));
                };
                let names = unique(members.iter().map(|m| type_name_str(&m.name)).collect());
                match members.iter().position(|m| i64::from(m.value) == l.value) {
                    Some(i) => {
                        let v = format_ident!("{}", names[i]);
                        quote!(#ty::#v)
                    }
                    None => quote!(#ty::from_value(0)),
                }
            }
        }
    }

    pub(super) fn union(&self, item: &Item, u: &Union) -> TokenStream {
        let rt = &self.rt;
        let name = type_name(&item.xdr_name);
        let xdr = &item.xdr_name;
        let dt = self.disc_type(&u.disc);
        // One variant per label.
        let mut raw_names = Vec::new();
        let mut variants: Vec<(&Label, &UnionArm)> = Vec::new();
        for arm in &u.arms {
            for l in &arm.labels {
                raw_names.push(match &l.name {
                    Some(n) => type_name_str(n),
                    None if l.value < 0 => format!("CaseMinus{}", l.value.unsigned_abs()),
                    None => format!("Case{}", l.value),
                });
                variants.push((l, arm));
            }
        }
        if u.default.is_some() {
            raw_names.push("Default".into());
        }
        let mut names = unique(raw_names);
        let default_name = if u.default.is_some() {
            names.pop().map(|n| format_ident!("{}", n))
        } else {
            None
        };
        let vnames: Vec<proc_macro2::Ident> =
            names.iter().map(|n| format_ident!("{}", n)).collect();

        let mut decls = Vec::new();
        let mut disc_arms = Vec::new();
        let mut enc_arms = Vec::new();
        let mut dec_arms = Vec::new();
        // Arms whose value can be decoded in place when `self` already holds that arm.
        let mut in_place_arms = Vec::new();
        let derived_default = self.union_derived_default(item, u);
        for (i, ((l, arm), v)) in variants.iter().zip(&vnames).enumerate() {
            let value = self.label_value(&u.disc, l);
            let label_text = l.name.clone().unwrap_or_else(|| l.value.to_string());
            match &arm.payload {
                Payload::Void => {
                    let d = doc(&format!(
                        "`case {label_text}: void;` ({}).",
                        self.origin(&arm.loc)
                    ));
                    let default = (derived_default == Some(i)).then(|| quote!(#[default]));
                    decls.push(quote!(#d #default #v,));
                    disc_arms.push(quote!(Self::#v => #value,));
                    enc_arms.push(quote!(Self::#v => {}));
                    dec_arms.push(quote!(#value => Self::#v,));
                }
                Payload::One(f) => {
                    let d = doc(&format!(
                        "`case {label_text}:` `{}` ({}).",
                        f.name,
                        self.origin(&f.loc)
                    ));
                    let t = self.rust_type(&f.repr);
                    let e = self.encode_field(f, quote!(value));
                    let de = self.decode_field(f);
                    decls.push(quote!(#d #v(#t),));
                    disc_arms.push(quote!(Self::#v(..) => #value,));
                    enc_arms.push(quote!(Self::#v(value) => { #e }));
                    dec_arms.push(quote!(#value => Self::#v(#de),));
                    if !Self::is_ddp(f) {
                        if let Some(stmt) = self.decode_in_place(&f.repr, quote!(value)) {
                            in_place_arms.push(quote!((#value, Self::#v(value)) => { #stmt }));
                        }
                    }
                }
                Payload::Many(fs) => {
                    let d = doc(&format!(
                        "`case {label_text}:` (several declarations, an anonymous struct) ({}).",
                        self.origin(&arm.loc)
                    ));
                    let ArmFields {
                        fnames,
                        fdecls,
                        binds,
                        encs,
                        decs,
                    } = self.arm_fields(fs);
                    decls.push(quote!(#d #v { #(#fdecls)* },));
                    disc_arms.push(quote!(Self::#v { .. } => #value,));
                    enc_arms.push(quote!(Self::#v { #(#fnames: #binds),* } => { #(#encs)* }));
                    dec_arms.push(quote!(#value => Self::#v { #(#decs)* },));
                }
            }
        }
        let explicit: Vec<TokenStream> = variants
            .iter()
            .map(|(l, _)| self.label_value(&u.disc, l))
            .collect();
        let fallback = match (&u.default, &default_name) {
            (Some(arm), Some(dn)) => {
                let guard = quote! {
                    if matches!(*discriminant, #(#explicit)|*) {
                        return ::core::result::Result::Err(enc.error(#rt::ErrorKind::Invalid(
                            "union default arm used with the discriminant of an explicit arm",
                        )));
                    }
                };
                match &arm.payload {
                    Payload::Void => {
                        let d = doc(&format!(
                            "`default: void;` ({}): any other discriminant.",
                            self.origin(&arm.loc)
                        ));
                        decls.push(quote!(#d #dn { #[doc = " The discriminant (none of the explicit cases)."] discriminant: #dt },));
                        disc_arms.push(quote!(Self::#dn { discriminant } => *discriminant,));
                        enc_arms.push(quote!(Self::#dn { discriminant } => { #guard }));
                        quote!(discriminant => Self::#dn { discriminant },)
                    }
                    Payload::One(f) => {
                        let d = doc(&format!(
                            "`default:` `{}` ({}): any other discriminant.",
                            f.name,
                            self.origin(&f.loc)
                        ));
                        let t = self.rust_type(&f.repr);
                        let e = self.encode_field(f, quote!(value));
                        let de = self.decode_field(f);
                        decls.push(quote!(#d #dn { #[doc = " The discriminant (none of the explicit cases)."] discriminant: #dt, #[doc = " The arm's value."] value: #t },));
                        disc_arms.push(quote!(Self::#dn { discriminant, .. } => *discriminant,));
                        enc_arms.push(quote!(Self::#dn { discriminant, value } => { #guard #e }));
                        quote!(discriminant => Self::#dn { discriminant, value: #de },)
                    }
                    Payload::Many(fs) => {
                        let d = doc(&format!(
                            "`default:` (several declarations) ({}): any other discriminant.",
                            self.origin(&arm.loc)
                        ));
                        let ArmFields {
                            fnames,
                            fdecls,
                            binds,
                            encs,
                            decs,
                        } = self.arm_fields(fs);
                        decls.push(quote!(#d #dn { #[doc = " The discriminant (none of the explicit cases)."] discriminant: #dt, #(#fdecls)* },));
                        disc_arms.push(quote!(Self::#dn { discriminant, .. } => *discriminant,));
                        enc_arms.push(quote!(Self::#dn { discriminant, #(#fnames: #binds),* } => { #guard #(#encs)* }));
                        quote!(discriminant => Self::#dn { discriminant, #(#decs)* },)
                    }
                }
            }
            _ => quote! {
                other => {
                    return ::core::result::Result::Err(#rt::Error::new(
                        #rt::ErrorKind::UnknownDiscriminant { type_name: #xdr, value: other as i64 },
                        at,
                    ))
                }
            },
        };
        let (default_impl, default_text) =
            self.union_default_impl(item, u, &vnames, default_name.as_ref());
        let d = doc(&format!(
            "XDR union `{xdr}` ({}), discriminant `{}`.{default_text}",
            item.origin,
            u.disc_name.as_deref().unwrap_or("(unnamed)")
        ));
        let derives = self.derives(&item.props, derived_default.is_some());
        let min = self.min_len(&item.props);
        // An enum discriminant's own decode already rejected values outside the enum; the
        // fallback arm catches members (or integers) that have no arm.
        let arm_match = quote! {
            #[allow(unreachable_patterns)]
            let value = match d { #(#dec_arms)* #fallback };
            ::core::result::Result::Ok(value)
        };
        let in_place = !item.props.recursive && !in_place_arms.is_empty();
        // With an in-place decode, the arm decoding is shared through a private helper.
        let (body, helper, in_place_fn) = if in_place {
            let body = quote! {
                let at = dec.offset();
                let d = <#dt as #rt::Decode>::decode(dec)?;
                Self::decode_arm(d, at, dec)
            };
            let helper = quote! {
                /// Decodes the arm selected by discriminant `d` (read at offset `at`).
                fn decode_arm(d: #dt, at: usize, dec: &mut #rt::Decoder) -> #rt::Result<Self> {
                    let _ = at;
                    #arm_match
                }
            };
            // Inlined into its container: the arm's in-place decode then writes straight
            // into the value being built (measured with `v1_header_loop`, see `mod.rs`).
            let in_place_fn = quote! {
                #[inline]
                fn decode_in_place(&mut self, dec: &mut #rt::Decoder) -> #rt::Result<()> {
                    let at = dec.offset();
                    let d = <#dt as #rt::Decode>::decode(dec)?;
                    #[allow(unreachable_patterns)]
                    match (d, &mut *self) {
                        #(#in_place_arms)*
                        _ => *self = Self::decode_arm(d, at, dec)?,
                    }
                    ::core::result::Result::Ok(())
                }
            };
            (body, helper, in_place_fn)
        } else {
            let body = quote! {
                let at = dec.offset();
                let d = <#dt as #rt::Decode>::decode(dec)?;
                let _ = at;
                #arm_match
            };
            (body, TokenStream::new(), TokenStream::new())
        };
        let decode_fn = self.decode_fn(&item.props, body);
        quote! {
            #d
            #derives
            pub enum #name { #(#decls)* }

            #default_impl

            impl #name {
                /// The discriminant this value is encoded with.
                pub fn discriminant(&self) -> #dt {
                    match self { #(#disc_arms)* }
                }
                #helper
            }

            impl #rt::Encode for #name {
                fn encode(&self, enc: &mut #rt::Encoder) -> #rt::Result<()> {
                    #rt::Encode::encode(&self.discriminant(), enc)?;
                    match self { #(#enc_arms)* }
                    ::core::result::Result::Ok(())
                }
            }

            impl #rt::Decode for #name {
                #min
                #decode_fn
                #in_place_fn
            }
        }
    }
}

/// The pieces of a union arm with several declarations (the drafts' dialect): field names,
/// declarations, fresh bindings for encoding, encode statements and decode initialisers.
struct ArmFields {
    fnames: Vec<proc_macro2::Ident>,
    fdecls: Vec<TokenStream>,
    binds: Vec<proc_macro2::Ident>,
    encs: Vec<TokenStream>,
    decs: Vec<TokenStream>,
}

impl Gen<'_> {
    fn arm_fields(&self, fs: &[Field]) -> ArmFields {
        let fnames: Vec<_> = fs.iter().map(|f| field_name(&f.name)).collect();
        let fdecls = fs
            .iter()
            .zip(&fnames)
            .map(|(f, n)| {
                let fd = self.field_doc(f);
                let t = self.rust_type(&f.repr);
                quote!(#fd #n: #t,)
            })
            .collect();
        // Bind fields to fresh names: a field called `enc` must not shadow the encoder.
        let binds: Vec<_> = (0..fs.len())
            .map(|i| format_ident!("field_{}", i))
            .collect();
        let encs = fs
            .iter()
            .zip(&binds)
            .map(|(f, b)| self.encode_field(f, quote!(#b)))
            .collect();
        let decs = fs
            .iter()
            .zip(&fnames)
            .map(|(f, n)| {
                let e = self.decode_field(f);
                quote!(#n: #e,)
            })
            .collect();
        ArmFields {
            fnames,
            fdecls,
            binds,
            encs,
            decs,
        }
    }
}
