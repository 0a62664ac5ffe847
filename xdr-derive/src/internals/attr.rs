//! Reading `#[xdr(..)]` attributes into plain data.
//!
//! Every key is accepted by one parser and then checked against the place it was written
//! (container, union arm, field), so a key in the wrong place gets a message saying where it
//! belongs rather than "unknown attribute".

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;
use syn::{Expr, Token};

use super::symbol::*;
use super::Ctxt;

/// Where an attribute was written.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Place {
    /// On the struct or enum itself.
    Container,
    /// On an enum variant (a union arm or an enum constant).
    Variant,
    /// On a field.
    Field,
}

/// One attribute value with the key it was written with (for spans).
pub struct Attr<T> {
    name: Symbol,
    value: Option<(syn::Path, T)>,
}

impl<T> Attr<T> {
    fn none(name: Symbol) -> Self {
        Attr { name, value: None }
    }

    fn set(&mut self, cx: &Ctxt, key: &syn::Path, value: T) {
        if self.value.is_some() {
            cx.error_spanned_by(key, format!("duplicate xdr attribute `{}`", self.name));
        } else {
            self.value = Some((key.clone(), value));
        }
    }

    /// The value, if the attribute was given.
    pub fn get(&self) -> Option<&T> {
        self.value.as_ref().map(|(_, v)| v)
    }

    /// The key as written, for error spans.
    pub fn key(&self) -> Option<&syn::Path> {
        self.value.as_ref().map(|(k, _)| k)
    }

    /// Whether the attribute was given.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

/// Everything `#[xdr(..)]` can say about one container, variant or field.
pub struct Attrs {
    /// `crate = "path"`.
    pub krate: Attr<syn::Path>,
    /// `switch = Type`.
    pub switch: Attr<syn::Type>,
    /// Every `case = value`, in order, with its key.
    pub cases: Vec<(syn::Path, Expr)>,
    /// `default`.
    pub default: Attr<()>,
    /// `discriminant`.
    pub discriminant: Attr<()>,
    /// `max = N`.
    pub max: Attr<Expr>,
    /// `fixed = N`.
    pub fixed: Attr<Expr>,
    /// `list`.
    pub list: Attr<()>,
    /// `ddp`.
    pub ddp: Attr<()>,
}

impl Attrs {
    /// Reads every `#[xdr(..)]` in `attrs`, reporting unknown, malformed, duplicate and
    /// misplaced keys to `cx`.
    pub fn from_ast(cx: &Ctxt, attrs: &[syn::Attribute], place: Place) -> Self {
        let mut out = Attrs {
            krate: Attr::none(CRATE),
            switch: Attr::none(SWITCH),
            cases: Vec::new(),
            default: Attr::none(DEFAULT),
            discriminant: Attr::none(DISCRIMINANT),
            max: Attr::none(MAX),
            fixed: Attr::none(FIXED),
            list: Attr::none(LIST),
            ddp: Attr::none(DDP),
        };
        for attr in attrs.iter().filter(|a| a.path() == XDR) {
            if let syn::Meta::Path(_) = attr.meta {
                cx.error_spanned_by(attr, "expected a list: #[xdr(..)]");
                continue;
            }
            if let Err(err) = attr.parse_nested_meta(|meta| out.parse_one(cx, meta, place)) {
                cx.syn_error(err);
            }
        }
        out
    }

    fn parse_one(&mut self, cx: &Ctxt, meta: ParseNestedMeta<'_>, place: Place) -> syn::Result<()> {
        let key = meta.path.clone();
        let Some(symbol) = ALL.iter().copied().find(|s| key == *s) else {
            let expected = ALL
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ");
            cx.error_spanned_by(
                &key,
                format!(
                    "unknown xdr attribute `{}`; expected one of {expected}",
                    key.to_token_stream_string()
                ),
            );
            return skip_value(&meta);
        };
        if let Some(msg) = misplaced(symbol, place) {
            if symbol == DDP {
                cx.ddp_error_spanned_by(&key, msg);
            } else {
                cx.error_spanned_by(&key, msg);
            }
            return skip_value(&meta);
        }
        match symbol {
            CRATE => {
                let lit: syn::LitStr = meta.value()?.parse()?;
                match lit.parse::<syn::Path>() {
                    Ok(path) => self.krate.set(cx, &key, path),
                    Err(_) => cx.error_spanned_by(&lit, "expected a path such as \"::rpcrdma\""),
                }
            }
            SWITCH => {
                let ty: syn::Type = meta.value()?.parse()?;
                self.switch.set(cx, &key, ty);
            }
            CASE => {
                let value: Expr = meta.value()?.parse()?;
                self.cases.push((key, value));
            }
            MAX => {
                let value: Expr = meta.value()?.parse()?;
                self.max.set(cx, &key, value);
            }
            FIXED => {
                let value: Expr = meta.value()?.parse()?;
                self.fixed.set(cx, &key, value);
            }
            flag => {
                if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                    cx.error_spanned_by(&key, format!("`{flag}` takes no value: #[xdr({flag})]"));
                    skip_value(&meta)?;
                }
                let slot = match flag {
                    DEFAULT => &mut self.default,
                    DISCRIMINANT => &mut self.discriminant,
                    LIST => &mut self.list,
                    _ => &mut self.ddp,
                };
                slot.set(cx, &key, ());
            }
        }
        Ok(())
    }
}

/// Why `symbol` may not be written at `place`, if it may not.
fn misplaced(symbol: Symbol, place: Place) -> Option<String> {
    let allowed = match symbol {
        CRATE | SWITCH => Place::Container,
        CASE | DEFAULT => Place::Variant,
        _ => Place::Field,
    };
    if allowed == place {
        return None;
    }
    Some(match (symbol, place) {
        (DDP, Place::Container) => "a whole struct, enum or union cannot be DDP-eligible \
             (RFC 8166 section 4.4.3.2: \"a union data type should never be made DDP-eligible\"); \
             mark its opaque (Bytes), string (XdrString) or array (Vec) fields with #[xdr(ddp)]"
            .to_owned(),
        (DDP, Place::Variant) => "a union arm cannot be DDP-eligible as a whole; \
             mark the opaque (Bytes), string (XdrString) or array (Vec) field inside it with #[xdr(ddp)]"
            .to_owned(),
        (CRATE | SWITCH, _) => {
            format!("`{symbol}` belongs on the struct or enum itself, not on a {}", name(place))
        }
        (CASE | DEFAULT, _) => format!(
            "`{symbol}` selects a union arm: put it on an enum variant, not on a {}",
            name(place)
        ),
        _ => format!("`{symbol}` belongs on a field, not on a {}", name(place)),
    })
}

fn name(place: Place) -> &'static str {
    match place {
        Place::Container => "struct or enum",
        Place::Variant => "variant",
        Place::Field => "field",
    }
}

/// Consumes `= value` or `(..)` after a key that is being rejected, so later keys still parse.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<proc_macro2::Group>()?;
    }
    Ok(())
}

trait PathString {
    fn to_token_stream_string(&self) -> String;
}

impl PathString for syn::Path {
    fn to_token_stream_string(&self) -> String {
        let tokens: TokenStream = quote::quote!(#self);
        tokens.to_string().replace(' ', "")
    }
}
