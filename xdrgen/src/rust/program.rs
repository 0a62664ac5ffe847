//! Programs: a module per program and version, a unit struct per procedure implementing
//! `Procedure` (RFC 5531 section 12), and with services on, the client, server trait and
//! registration of `services.rs` in each version module.

use proc_macro2::{Ident, TokenStream};
use quote::quote;

use super::ddp::DdpCounter;
use super::ident::{field_name, fn_name_str, ident, type_name_str, unique};
use super::{doc, lit_u32, lit_usize, Gen};
use crate::ir::*;

impl Gen<'_> {
    /// A procedure's `Args` type (see [`signature_tuple`]).
    pub(super) fn signature_type(&self, reprs: &[Repr]) -> TokenStream {
        let types: Vec<TokenStream> = reprs.iter().map(|r| self.rust_type(r)).collect();
        signature_tuple(&types)
    }

    pub(super) fn program(&self, item: &Item, p: &Program) -> TokenStream {
        let inner = Gen {
            model: self.model,
            sources: self.sources,
            rt: self.rt.clone(),
            rpc: self.rpc.clone(),
            services: self.services,
            prefix: quote!(super::super::),
            defaults: self.defaults,
        };
        inner.program_in(item, p)
    }

    pub(super) fn program_in(&self, item: &Item, p: &Program) -> TokenStream {
        let m = field_name(&item.xdr_name);
        let hex = self.written_in_hex(&p.number_loc);
        let (num, num_text) = if hex {
            let text = format!("{:#010x}", p.number);
            let lit = syn::LitInt::new(&text, proc_macro2::Span::call_site());
            (quote!(#lit), format!("{text} ({})", p.number))
        } else {
            let lit = lit_u32(p.number);
            (quote!(#lit), p.number.to_string())
        };
        let versions = p.versions.iter().map(|v| {
            let vm = field_name(&v.name);
            let vn = lit_u32(v.number);
            let names = VersionNames::new(v, self.services);
            let procs = v
                .procedures
                .iter()
                .zip(&names.procs)
                .map(|(pr, pid)| self.procedure(pr, pid));
            let services = if self.services {
                self.services(item, p, v, &names)
            } else {
                TokenStream::new()
            };
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
                    #services
                }
            }
        });
        let d = doc(&format!(
            "XDR program `{}` = {} ({}).",
            item.xdr_name, num_text, item.origin
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

    /// Whether the number at `loc` was written as a hexadecimal literal.
    fn written_in_hex(&self, loc: &crate::ast::Loc) -> bool {
        let text = self.sources.text(loc.file);
        text.get(loc.span.clone())
            .is_some_and(|t| t.starts_with("0x") || t.starts_with("0X"))
    }

    /// The unit struct of one procedure and its `Procedure` impl.
    fn procedure(&self, pr: &ProgramProcedure, pid: &Ident) -> TokenStream {
        let rt = &self.rt;
        let pn = lit_u32(pr.number);
        let args = self.signature_type(&pr.args);
        let res = match &pr.result {
            Some(r) => self.rust_type(r),
            None => quote!(()),
        };
        let ddp_items = match &pr.result {
            Some(r) => DdpCounter::new(self.model).repr(r),
            None => 0,
        };
        let ddp_items = (ddp_items > 0).then(|| {
            let n = lit_usize(ddp_items);
            quote! {
                /// The most DDP-eligible items the result carries (Write chunks to provide).
                const RESULT_DDP_ITEMS: usize = #n;
            }
        });
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
                #ddp_items
            }
        }
    }
}

/// How a procedure's arguments form one value: `()` for none, the argument itself for one, a
/// tuple of two to four (the runtime's `Encode` tuples), and beyond, pairs nesting to the right:
/// `(A, (B, C, D, E))` encodes A, B, C, D, E in order. Used for the `Args` type and for the
/// expressions and patterns that pack and unpack the arguments, so the three agree.
pub(super) fn signature_tuple(parts: &[TokenStream]) -> TokenStream {
    match parts {
        [] => quote!(()),
        [one] => one.clone(),
        [_, _] | [_, _, _] | [_, _, _, _] => quote!((#(#parts,)*)),
        [first, rest @ ..] => {
            let rest = signature_tuple(rest);
            quote!((#first, #rest))
        }
    }
}

/// The Rust names inside one version module.
pub(super) struct VersionNames {
    /// The typed client (`NfsV3Client`).
    pub client: Ident,
    /// The server trait (`NfsV3Server`).
    pub server: Ident,
    /// The private `Service` adapter (`NfsV3Service`).
    pub service: Ident,
    /// The procedure structs, in order.
    pub procs: Vec<Ident>,
    /// The client's and the server trait's methods, in order.
    pub methods: Vec<Ident>,
}

/// Method names a procedure does not get, because the client has them already (`new`, `rpc`)
/// or a derived trait would be shadowed (`clone`, `fmt`): they get a `_` suffix.
const RESERVED_METHODS: &[&str] = &["new", "rpc", "clone", "clone_from", "fmt"];

impl VersionNames {
    /// Names for version `v`. With services, the client, the server trait and the service are
    /// named after the version (`NFS_V3` -> `NfsV3Client`) and keep those names: a procedure
    /// struct that would clash gets a number (`NfsV3Client2`).
    fn new(v: &ProgramVersion, services: bool) -> Self {
        let base = type_name_str(&v.name);
        let own = [
            format!("{base}Client"),
            format!("{base}Server"),
            format!("{base}Service"),
        ];
        let reserved = if services { own.len() } else { 0 };
        let types = unique(
            own[..reserved]
                .iter()
                .cloned()
                .chain(v.procedures.iter().map(|pr| type_name_str(&pr.name)))
                .collect(),
        );
        let methods = unique(
            v.procedures
                .iter()
                .map(|pr| {
                    let m = fn_name_str(&pr.name);
                    if RESERVED_METHODS.contains(&m.as_str()) {
                        format!("{m}_")
                    } else {
                        m
                    }
                })
                .collect(),
        );
        let [client, server, service] = own.map(|n| ident(&n));
        VersionNames {
            client,
            server,
            service,
            procs: types[reserved..].iter().map(|n| ident(n)).collect(),
            methods: methods.iter().map(|n| ident(n)).collect(),
        }
    }
}
