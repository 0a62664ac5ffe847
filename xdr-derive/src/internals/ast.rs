//! The parsed form of a derive input: the syntax tree cut down to what XDR needs, with every
//! node keeping a reference to its original syntax for error spans.

use syn::ext::IdentExt;
use syn::{Expr, Type};

use super::attr::{Attrs, Place};
use super::Ctxt;

/// A struct or enum being derived.
pub struct Container<'a> {
    /// The type's name.
    pub ident: &'a syn::Ident,
    /// The type's generics.
    pub generics: &'a syn::Generics,
    /// Container-level `#[xdr(..)]`.
    pub attrs: Attrs,
    /// The shape.
    pub data: Data<'a>,
}

/// What kind of XDR type the Rust type is.
pub enum Data<'a> {
    /// An XDR struct (RFC 4506 section 4.14).
    Struct(Vec<Field<'a>>),
    /// An XDR enum (section 4.3): an enum whose variants carry no data and no `case`.
    Enum(Vec<Constant<'a>>),
    /// An XDR discriminated union (section 4.15): an enum with data, `case` or `switch`.
    Union(Vec<Arm<'a>>),
}

/// One enum constant.
pub struct Constant<'a> {
    /// Its name.
    pub ident: &'a syn::Ident,
    /// Its explicit value, `A = 3`.
    pub value: Option<&'a Expr>,
}

/// One union arm.
pub struct Arm<'a> {
    /// The variant's name.
    pub ident: &'a syn::Ident,
    /// `case`/`default`.
    pub attrs: Attrs,
    /// The arm's fields; one of them may hold the discriminant.
    pub fields: Vec<Field<'a>>,
    /// The variant.
    pub original: &'a syn::Variant,
}

impl Arm<'_> {
    /// The field marked `#[xdr(discriminant)]`, if any.
    pub fn discriminant_field(&self) -> Option<(usize, &Field<'_>)> {
        self.fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.attrs.discriminant.is_set())
    }

    /// Whether this is the default arm.
    pub fn is_default(&self) -> bool {
        self.attrs.default.is_set()
    }
}

/// One field of a struct or union arm.
pub struct Field<'a> {
    /// `self.<member>`: a name or a tuple index.
    pub member: syn::Member,
    /// Field-level `#[xdr(..)]`.
    pub attrs: Attrs,
    /// The declared type.
    pub ty: &'a Type,
    /// The type recognised syntactically.
    pub shape: Shape<'a>,
}

impl Field<'_> {
    /// The field's name for messages and `DDP_FIELDS`: `name` or the tuple index.
    pub fn name(&self) -> String {
        match &self.member {
            syn::Member::Named(id) => id.unraw().to_string(),
            syn::Member::Unnamed(i) => i.index.to_string(),
        }
    }
}

/// A field type as far as the derive can tell from its syntax.
#[derive(Copy, Clone)]
pub enum Shape<'a> {
    /// `Bytes`: opaque data.
    Bytes,
    /// `XdrString`: a string.
    XdrString,
    /// `Vec<T>`: an array or list.
    Vec(&'a Type),
    /// `Option<T>`: optional data.
    Option(&'a Type),
    /// `Box<T>`.
    Box,
    /// `[T; N]`: a fixed-length array.
    Array,
    /// Anything else: encoded through its own `Encode`/`Decode`.
    Other,
}

impl<'a> Shape<'a> {
    /// Recognises `ty` by its last path segment.
    pub fn of(ty: &'a Type) -> Self {
        match ungroup(ty) {
            Type::Array(_) => Shape::Array,
            Type::Path(p) if p.qself.is_none() => {
                let Some(last) = p.path.segments.last() else {
                    return Shape::Other;
                };
                let arg = single_type_arg(&last.arguments);
                match (last.ident.to_string().as_str(), arg) {
                    ("Bytes", None) => Shape::Bytes,
                    ("XdrString", None) => Shape::XdrString,
                    ("Vec", Some(t)) => Shape::Vec(t),
                    ("Option", Some(t)) => Shape::Option(t),
                    ("Box", Some(_)) => Shape::Box,
                    _ => Shape::Other,
                }
            }
            _ => Shape::Other,
        }
    }

    /// Whether DDP can move an item of this shape: opaque, string or array, possibly as
    /// optional data (RFC 8166 section 4.4.3.2: the "is present" flag stays inline).
    pub fn is_ddp_capable(self) -> bool {
        match self {
            Shape::Bytes | Shape::XdrString | Shape::Vec(_) => true,
            Shape::Option(inner) => {
                matches!(
                    Shape::of(inner),
                    Shape::Bytes | Shape::XdrString | Shape::Vec(_)
                )
            }
            _ => false,
        }
    }
}

/// Strips invisible groups (types passed through `macro_rules!`) and parentheses.
pub fn ungroup(mut ty: &Type) -> &Type {
    loop {
        match ty {
            Type::Group(g) => ty = &g.elem,
            Type::Paren(p) => ty = &p.elem,
            _ => return ty,
        }
    }
}

/// The `T` of `Name<T>`, when there is exactly one generic argument and it is a type.
pub fn single_type_arg(args: &syn::PathArguments) -> Option<&Type> {
    let syn::PathArguments::AngleBracketed(a) = args else {
        return None;
    };
    match a.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(t)] => Some(t),
        _ => None,
    }
}

impl<'a> Container<'a> {
    /// Reads `input`; `None` when it cannot be an XDR type at all (a Rust `union`), after
    /// reporting why.
    pub fn from_ast(cx: &Ctxt, input: &'a syn::DeriveInput) -> Option<Self> {
        let attrs = Attrs::from_ast(cx, &input.attrs, Place::Container);
        let data = match &input.data {
            syn::Data::Struct(s) => Data::Struct(fields_from_ast(cx, &s.fields)),
            syn::Data::Enum(e) => enum_from_ast(cx, e, &attrs),
            syn::Data::Union(u) => {
                let msg = "Rust unions have no XDR encoding; write an XDR union as an enum \
                           whose variants carry #[xdr(case = ..)]";
                // Both derives stop here, so each reports it.
                cx.error_spanned_by(u.union_token, msg);
                cx.ddp_error_spanned_by(u.union_token, msg);
                return None;
            }
        };
        Some(Container {
            ident: &input.ident,
            generics: &input.generics,
            attrs,
            data,
        })
    }
}

fn enum_from_ast<'a>(cx: &Ctxt, e: &'a syn::DataEnum, attrs: &Attrs) -> Data<'a> {
    let variant_attrs: Vec<Attrs> = e
        .variants
        .iter()
        .map(|v| Attrs::from_ast(cx, &v.attrs, Place::Variant))
        .collect();
    // An enum is an XDR union as soon as anything says so: a `switch`, a variant with data,
    // or a variant with `case`/`default`. Otherwise it is an XDR enum.
    let is_union = attrs.switch.is_set()
        || e.variants.iter().any(|v| !v.fields.is_empty())
        || variant_attrs
            .iter()
            .any(|a| !a.cases.is_empty() || a.default.is_set());
    if is_union {
        let arms = e
            .variants
            .iter()
            .zip(variant_attrs)
            .map(|(v, attrs)| Arm {
                ident: &v.ident,
                attrs,
                fields: fields_from_ast(cx, &v.fields),
                original: v,
            })
            .collect();
        Data::Union(arms)
    } else {
        let constants = e
            .variants
            .iter()
            .map(|v| Constant {
                ident: &v.ident,
                value: v.discriminant.as_ref().map(|(_, e)| e),
            })
            .collect();
        Data::Enum(constants)
    }
}

fn fields_from_ast<'a>(cx: &Ctxt, fields: &'a syn::Fields) -> Vec<Field<'a>> {
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| Field {
            member: match &f.ident {
                Some(id) => syn::Member::Named(id.clone()),
                None => syn::Member::Unnamed(i.into()),
            },
            attrs: Attrs::from_ast(cx, &f.attrs, Place::Field),
            ty: &f.ty,
            shape: Shape::of(&f.ty),
        })
        .collect()
}
