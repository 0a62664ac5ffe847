//! Programs: a module per program and version, a unit struct per procedure implementing
//! `Procedure` (RFC 5531 section 12).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::ident::{field_name, type_name_str, unique};
use super::{doc, lit_u32, Gen};
use crate::ir::*;

impl Gen<'_> {
    pub(super) fn signature_type(&self, reprs: &[Repr]) -> TokenStream {
        match reprs {
            [] => quote!(()),
            [one] => self.rust_type(one),
            [a, b, c, d] => {
                let ts = [a, b, c, d].map(|r| self.rust_type(r));
                quote!((#(#ts,)*))
            }
            [a, b, c] => {
                let ts = [a, b, c].map(|r| self.rust_type(r));
                quote!((#(#ts,)*))
            }
            [first, rest @ ..] => {
                // Pairs nest to the right: `(A, (B, C))` encodes A, B, C in order.
                let a = self.rust_type(first);
                let b = self.signature_type(rest);
                quote!((#a, #b))
            }
        }
    }

    pub(super) fn program(&self, item: &Item, p: &Program) -> TokenStream {
        let inner = Gen {
            model: self.model,
            sources: self.sources,
            rt: self.rt.clone(),
            prefix: quote!(super::super::),
        };
        inner.program_in(item, p)
    }

    pub(super) fn program_in(&self, item: &Item, p: &Program) -> TokenStream {
        let rt = &self.rt;
        let m = field_name(&item.xdr_name);
        let num = lit_u32(p.number);
        let versions = p.versions.iter().map(|v| {
            let vm = field_name(&v.name);
            let vn = lit_u32(v.number);
            let pnames = unique(
                v.procedures
                    .iter()
                    .map(|pr| type_name_str(&pr.name))
                    .collect(),
            );
            let procs = v.procedures.iter().zip(pnames).map(|(pr, pname)| {
                let pid = format_ident!("{}", pname);
                let pn = lit_u32(pr.number);
                let args = self.signature_type(&pr.args);
                let res = match &pr.result {
                    Some(r) => self.rust_type(r),
                    None => quote!(()),
                };
                let xname = &pr.name;
                let d = doc(&format!(
                    "Procedure `{}` = {} ({}).",
                    pr.name, pr.number, pr.origin
                ));
                quote! {
                    #d
                    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
                    pub struct #pid;
                    impl #rt::Procedure for #pid {
                        const PROGRAM: u32 = super::PROGRAM;
                        const VERSION: u32 = VERSION;
                        const PROCEDURE: u32 = #pn;
                        const NAME: &'static str = #xname;
                        type Args = #args;
                        type Result = #res;
                    }
                }
            });
            let d = doc(&format!(
                "Version `{}` = {} ({}).",
                v.name, v.number, v.origin
            ));
            quote! {
                #d
                pub mod #vm {
                    /// The version number.
                    pub const VERSION: u32 = #vn;
                    #(#procs)*
                }
            }
        });
        let d = doc(&format!(
            "XDR program `{}` = {} ({}).",
            item.xdr_name, p.number, item.origin
        ));
        quote! {
            #d
            pub mod #m {
                /// The program number.
                pub const PROGRAM: u32 = #num;
                #(#versions)*
            }
        }
    }
}
