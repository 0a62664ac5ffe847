//! Services (`Config::services`, on by default): for every program version, inside its module,
//! a typed async client, a server trait with one async method per procedure, and `register` /
//! `register_arc`, which host an implementation of the trait on a `ServerBuilder` through a
//! private `Service` adapter. All of it is thin: the client calls `rpc::Client::call` with the
//! procedure structs, and the adapter decodes with `rpc::decode_args` and boxes the method's
//! future with `rpc::handler`.
//!
//! Names (from the version's name, `NFS_V3`): `NfsV3Client`, `NfsV3Server`, and the functions
//! `nfs_v3::register` and `nfs_v3::register_arc`. Types carry the version so that several
//! versions' clients and servers can be imported side by side, and beside `rpc::Client` and
//! `rpc::Server`; functions are called through their module. Methods are the procedures'
//! names in snake_case (`NFSPROC3_READ` -> `nfsproc3_read`).

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::program::{signature_tuple, VersionNames};
use super::{doc, lit_u32, Gen};
use crate::ir::*;

/// More arguments than this (after `self` and the context) get
/// `#[allow(clippy::too_many_arguments)]` on the trait method and the client method.
const MANY_ARGS: usize = 5;

/// One procedure as the client and the server see it.
struct Signature<'a> {
    procedure: &'a ProgramProcedure,
    /// The procedure struct.
    id: &'a Ident,
    /// The client's and the trait's method.
    method: &'a Ident,
    /// One parameter per XDR argument: `args` for one, `arg1`, `arg2`, ... for several.
    params: Vec<Ident>,
    /// The Rust type of each argument.
    types: Vec<TokenStream>,
    /// The result type (`()` for `void`).
    result: TokenStream,
}

impl Signature<'_> {
    /// The parameters packed into the procedure's `Args` value (an expression or a pattern).
    fn packed(&self) -> TokenStream {
        let params: Vec<TokenStream> = self.params.iter().map(|p| quote!(#p)).collect();
        signature_tuple(&params)
    }

    /// `name: Type, ...` for a method's parameter list.
    fn param_list(&self) -> TokenStream {
        let (p, t) = (&self.params, &self.types);
        quote!(#(#p: #t),*)
    }

    /// The parameters followed by `last`.
    fn param_list_with(&self, last: TokenStream) -> TokenStream {
        let (p, t) = (&self.params, &self.types);
        quote!(#(#p: #t,)* #last)
    }

    fn allow_many(&self) -> TokenStream {
        self.allow_more(0)
    }

    /// `allow_many` for a method with `extra` parameters besides.
    fn allow_more(&self, extra: usize) -> TokenStream {
        if self.params.len() + extra > MANY_ARGS {
            quote!(#[allow(clippy::too_many_arguments)])
        } else {
            TokenStream::new()
        }
    }
}

/// The name of the form of method `m` that takes per-call options: `<m>_with` (an escaped
/// name's trailing `_` dropped), `<m>_with_options` when another procedure's method already
/// has that name.
fn with_options_method(
    m: &proc_macro2::Ident,
    taken: &std::collections::HashSet<String>,
) -> proc_macro2::Ident {
    let base = m.to_string();
    let base = base.trim_start_matches("r#").trim_end_matches('_');
    let with = format!("{base}_with");
    if taken.contains(&with) {
        quote::format_ident!("{base}_with_options")
    } else {
        quote::format_ident!("{with}")
    }
}

impl Gen<'_> {
    /// The client, the server trait, the adapter and the registration functions of version
    /// `v` of `program` (`p`).
    pub(super) fn services(
        &self,
        program: &Item,
        p: &Program,
        v: &ProgramVersion,
        names: &VersionNames,
    ) -> TokenStream {
        let sigs: Vec<Signature> = v
            .procedures
            .iter()
            .zip(names.procs.iter().zip(&names.methods))
            .map(|(pr, (id, method))| {
                let params = match pr.args.len() {
                    0 => Vec::new(),
                    1 => vec![format_ident!("args")],
                    n => (1..=n).map(|k| format_ident!("arg{}", k)).collect(),
                };
                Signature {
                    procedure: pr,
                    id,
                    method,
                    params,
                    types: pr.args.iter().map(|r| self.rust_type(r)).collect(),
                    result: match &pr.result {
                        Some(r) => self.rust_type(r),
                        None => quote!(()),
                    },
                }
            })
            .collect();
        let what = format!(
            "version `{}` = {} of program `{}` = {} ({})",
            v.name, v.number, program.xdr_name, p.number, v.origin
        );
        let client = self.client(&what, names, &sigs);
        let server = self.server_trait(&what, names, &sigs);
        let adapter = self.adapter(&what, names, &sigs);
        quote! {
            #client
            #server
            #adapter
        }
    }

    fn client(&self, what: &str, names: &VersionNames, sigs: &[Signature]) -> TokenStream {
        let rpc = &self.rpc;
        let name = &names.client;
        let taken: std::collections::HashSet<String> =
            sigs.iter().map(|s| s.method.to_string()).collect();
        let methods = sigs.iter().map(|s| {
            let (id, m, res) = (s.id, s.method, &s.result);
            let params = s.param_list();
            let args = s.packed();
            let allow = s.allow_many();
            let d = doc(&format!(
                "Calls `{}` = {} ({}).",
                s.procedure.name, s.procedure.number, s.procedure.origin
            ));
            let with = with_options_method(m, &taken);
            let with_params = s.param_list_with(quote!(options: #rpc::CallOptions));
            let allow_with = s.allow_more(1);
            let dw = doc(&format!(
                "Calls `{}` = {} ({}) with per-call `options`: a deadline or timeout, the \
                 expected size of each DDP-eligible result, a registered buffer to receive it in.",
                s.procedure.name, s.procedure.number, s.procedure.origin
            ));
            quote! {
                #d
                #allow
                pub async fn #m(&self, #params) -> ::core::result::Result<#res, #rpc::Error> {
                    self.rpc.call::<#id>(&#args).await
                }

                #dw
                #allow_with
                pub async fn #with(&self, #with_params) -> ::core::result::Result<#res, #rpc::Error> {
                    self.rpc.call_with::<#id>(&#args, options).await
                }
            }
        });
        let d = doc(&format!(
            "A typed client for {what}: one async method per procedure.\n\n\
             Wraps an ONC RPC `Client` (any transport); clones share its connection. \
             Each method has a form taking per-call options (`<method>_with`: a deadline, \
             the expected size of each DDP-eligible result, a registered buffer to receive it \
             in)."
        ));
        quote! {
            #d
            #[derive(Debug, Clone)]
            pub struct #name {
                rpc: #rpc::Client,
            }

            impl #name {
                /// A client sending its calls through `rpc`.
                pub fn new(rpc: #rpc::Client) -> Self {
                    Self { rpc }
                }

                /// The untyped client underneath.
                pub fn rpc(&self) -> &#rpc::Client {
                    &self.rpc
                }

                #(#methods)*
            }
        }
    }

    fn server_trait(&self, what: &str, names: &VersionNames, sigs: &[Signature]) -> TokenStream {
        let rpc = &self.rpc;
        let (name, client) = (&names.server, &names.client);
        let methods = sigs.iter().map(|s| {
            let (m, res) = (s.method, &s.result);
            let params = s.param_list();
            let allow = s.allow_many();
            let d = doc(&format!(
                "Answers `{}` = {} ({}): the result, or the `ReplyError` to reply with.",
                s.procedure.name, s.procedure.number, s.procedure.origin
            ));
            quote! {
                #d
                #allow
                fn #m(&self, ctx: #rpc::CallContext, #params) -> impl ::core::future::Future<
                    Output = ::core::result::Result<#res, #rpc::ReplyError>,
                > + ::core::marker::Send;
            }
        });
        let d = doc(&format!(
            "The server side of {what}: one async method per procedure, each given the call's \
             `CallContext` and the decoded arguments.\n\n\
             Implement it with `async fn`s (their futures must be `Send`), then host the \
             implementation with `register` (or `register_arc`) in this module. Every \
             procedure must be implemented; one not offered can return \
             `Err(ReplyError::ProcUnavail)`. `{client}` is the matching client."
        ));
        quote! {
            #d
            pub trait #name: ::core::marker::Send + ::core::marker::Sync + 'static {
                #(#methods)*
            }
        }
    }

    /// The private `Service` adapter and the registration functions.
    fn adapter(&self, what: &str, names: &VersionNames, sigs: &[Signature]) -> TokenStream {
        let (rpc, rt) = (&self.rpc, &self.rt);
        let (server, service) = (&names.server, &names.service);
        let arms = sigs.iter().map(|s| {
            let num = lit_u32(s.procedure.number);
            let m = s.method;
            let params = &s.params;
            let decode = if params.is_empty() {
                TokenStream::new()
            } else {
                let (pattern, ty) = (s.packed(), signature_tuple(&s.types));
                quote!(let #pattern = #rpc::decode_args::<#ty>(dec)?;)
            };
            quote! {
                #num => {
                    #decode
                    let service = ::std::sync::Arc::clone(&self.0);
                    ::core::result::Result::Ok(#rpc::handler(async move {
                        <S as #server>::#m(&service, ctx, #(#params),*).await
                    }))
                }
            }
        });
        // A version whose procedures take no arguments never reads the decoder.
        let dec = if sigs.iter().any(|s| !s.params.is_empty()) {
            format_ident!("dec")
        } else {
            format_ident!("_dec")
        };
        let ctx = if sigs.is_empty() {
            format_ident!("_ctx")
        } else {
            format_ident!("ctx")
        };
        let d = doc(&format!(
            "Routes the calls of {what} to a `{server}` (see `register`)."
        ));
        let d_register = doc(&format!("Hosts `service` on `server` as {what}."));
        let d_register_arc = doc(&format!(
            "Hosts a shared `service` on `server` as {what}: one value can serve several \
             versions or programs."
        ));
        quote! {
            #d
            struct #service<S>(::std::sync::Arc<S>);

            impl<S: #server> #rpc::Service for #service<S> {
                fn program(&self) -> u32 {
                    super::PROGRAM
                }

                fn version(&self) -> u32 {
                    VERSION
                }

                fn call(
                    &self,
                    #ctx: #rpc::CallContext,
                    procedure: u32,
                    #dec: &mut #rt::Decoder<'_>,
                ) -> ::core::result::Result<#rpc::HandlerFuture, #rpc::DispatchError> {
                    match procedure {
                        #(#arms)*
                        _ => ::core::result::Result::Err(#rpc::DispatchError::ProcUnavail),
                    }
                }
            }

            #d_register
            pub fn register<S: #server>(server: &mut #rpc::ServerBuilder, service: S) {
                register_arc(server, ::std::sync::Arc::new(service));
            }

            #d_register_arc
            pub fn register_arc<S: #server>(
                server: &mut #rpc::ServerBuilder,
                service: ::std::sync::Arc<S>,
            ) {
                server.add(#service(service));
            }
        }
    }
}
