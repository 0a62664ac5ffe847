//! The rules a derive input must follow, one `check_*` function per rule. Every rule reports
//! to the [`Ctxt`] and keeps going, so one compile shows every mistake.

use std::collections::HashMap;

use quote::ToTokens;
use syn::{Expr, Type};

use super::ast::{ungroup, Arm, Constant, Container, Data, Field, Shape};
use super::Ctxt;

/// Runs every rule on `cont`.
pub fn check(cx: &Ctxt, cont: &Container<'_>) {
    check_switch_placement(cx, cont);
    match &cont.data {
        Data::Struct(fields) => {
            for field in fields {
                check_field(cx, field, false);
            }
        }
        Data::Enum(constants) => check_enum(cx, cont, constants),
        Data::Union(arms) => {
            check_union_not_empty(cx, cont, arms);
            check_switch_type(cx, cont);
            for arm in arms {
                check_arm_selector(cx, arm);
                check_arm_discriminant_field(cx, arm);
                for field in &arm.fields {
                    check_field(cx, field, true);
                }
            }
            check_single_default(cx, arms);
            check_case_values(cx, cont, arms);
        }
    }
}

/// `switch` names the discriminant type of a union, so only enums may carry it.
fn check_switch_placement(cx: &Ctxt, cont: &Container<'_>) {
    if let (Data::Struct(..), Some(key)) = (&cont.data, cont.attrs.switch.key()) {
        cx.error_spanned_by(
            key,
            "`switch` gives the discriminant type of a union; a struct has none",
        );
    }
}

/// RFC 4506 section 4.3: every enum identifier is given an explicit constant value, and the
/// value is a signed 32-bit integer.
fn check_enum(cx: &Ctxt, cont: &Container<'_>, constants: &[Constant<'_>]) {
    if constants.is_empty() {
        cx.error_spanned_by(
            cont.ident,
            "an XDR enum needs at least one constant (RFC 4506 section 4.3)",
        );
    }
    for c in constants {
        match c.value {
            None => cx.error_spanned_by(
                c.ident,
                format!(
                    "XDR enum constant `{}` needs an explicit value (RFC 4506 section 4.3): \
                     write `{} = <value>`",
                    c.ident, c.ident
                ),
            ),
            Some(value) => {
                if let Some(CaseKey::Int(v)) = case_key(value) {
                    if i32::try_from(v).is_err() {
                        cx.error_spanned_by(
                            value,
                            format!(
                                "{v} does not fit an XDR enum, which is a signed 32-bit integer"
                            ),
                        );
                    }
                }
            }
        }
    }
}

fn check_union_not_empty(cx: &Ctxt, cont: &Container<'_>, arms: &[Arm<'_>]) {
    if arms.is_empty() {
        cx.error_spanned_by(cont.ident, "an XDR union needs at least one arm");
    }
}

/// The discriminant of a union is an int, unsigned int, bool or enum (RFC 4506 section 4.15):
/// a plain type name.
fn check_switch_type(cx: &Ctxt, cont: &Container<'_>) {
    if let Some(ty) = cont.attrs.switch.get() {
        if !matches!(ungroup(ty), Type::Path(p) if p.qself.is_none()) {
            cx.error_spanned_by(
                ty,
                "the discriminant of an XDR union is `i32`, `u32`, `bool` or a C-like enum type",
            );
        }
    }
}

/// Every arm says which discriminants select it: `case` values or `default`, not both; the
/// values come from `#[xdr(case)]`, never from a Rust `= value`.
fn check_arm_selector(cx: &Ctxt, arm: &Arm<'_>) {
    if let Some((eq, value)) = &arm.original.discriminant {
        cx.error_spanned_by(
            quote::quote!(#eq #value),
            format!(
                "a union arm's discriminant goes in #[xdr(case = {})]",
                value.to_token_stream()
            ),
        );
    }
    match (arm.attrs.cases.is_empty(), arm.attrs.default.key()) {
        (true, None) => cx.error_spanned_by(
            arm.ident,
            format!(
                "union arm `{}` has no discriminant: add #[xdr(case = <value>)] or #[xdr(default)]",
                arm.ident
            ),
        ),
        (false, Some(key)) => cx.error_spanned_by(
            key,
            "an arm is either the `default` arm or selected by `case` values, not both",
        ),
        _ => {}
    }
}

/// At most one field of an arm holds the discriminant, and the default arm must have one:
/// it is taken by values the type does not name and must write the same value back.
fn check_arm_discriminant_field(cx: &Ctxt, arm: &Arm<'_>) {
    let marked: Vec<&Field<'_>> = arm
        .fields
        .iter()
        .filter(|f| f.attrs.discriminant.is_set())
        .collect();
    for extra in marked.iter().skip(1) {
        cx.error_spanned_by(
            extra.attrs.discriminant.key(),
            "only one field of an arm can hold the discriminant",
        );
    }
    if marked.is_empty() {
        if let Some(key) = arm.attrs.default.key() {
            cx.error_spanned_by(
                key,
                format!(
                    "the default arm `{}` must keep the discriminant it was decoded with, so it \
                     can encode it again: add a field marked #[xdr(discriminant)] of the switch type",
                    arm.ident
                ),
            );
        }
    }
}

/// RFC 4506 section 4.15 allows one `default` arm.
fn check_single_default(cx: &Ctxt, arms: &[Arm<'_>]) {
    for arm in arms.iter().filter(|a| a.is_default()).skip(1) {
        cx.error_spanned_by(
            arm.attrs.default.key(),
            "a union has at most one `default` arm (RFC 4506 section 4.15)",
        );
    }
}

/// A discriminant value as far as it can be compared before type checking.
#[derive(Clone, PartialEq, Eq, Hash)]
enum CaseKey {
    Int(i128),
    Bool(bool),
    Path(String),
}

impl std::fmt::Display for CaseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaseKey::Int(v) => write!(f, "{v}"),
            CaseKey::Bool(v) => write!(f, "{v}"),
            CaseKey::Path(p) => f.write_str(p),
        }
    }
}

fn case_key(expr: &Expr) -> Option<CaseKey> {
    match expr {
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse::<i128>().ok().map(CaseKey::Int),
            syn::Lit::Bool(b) => Some(CaseKey::Bool(b.value)),
            _ => None,
        },
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => match case_key(&u.expr)? {
            CaseKey::Int(v) => Some(CaseKey::Int(-v)),
            _ => None,
        },
        Expr::Path(p) if p.qself.is_none() => Some(CaseKey::Path(
            p.path.to_token_stream().to_string().replace(' ', ""),
        )),
        Expr::Group(g) => case_key(&g.expr),
        Expr::Paren(p) => case_key(&p.expr),
        _ => None,
    }
}

/// Case values are literals or paths to constants, fit the switch type, and are unique
/// across the union (RFC 4506 section 4.15). Values behind constants are compared by the
/// generated `match`, which denies unreachable patterns.
fn check_case_values(cx: &Ctxt, cont: &Container<'_>, arms: &[Arm<'_>]) {
    let switch = cont
        .attrs
        .switch
        .get()
        .map(|t| match ungroup(t) {
            // `u32`, `core::primitive::u32`: the last segment names the type.
            Type::Path(p) => p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default(),
            _ => String::new(),
        })
        .unwrap_or_else(|| "i32".to_owned());
    let mut seen: HashMap<CaseKey, &syn::Ident> = HashMap::new();
    for arm in arms {
        for (_, value) in &arm.attrs.cases {
            let Some(key) = case_key(value) else {
                cx.error_spanned_by(
                    value,
                    "a case value is an integer or boolean literal, or a path to a constant \
                     or enum variant",
                );
                continue;
            };
            let fits = match (&key, switch.as_str()) {
                (CaseKey::Int(v), "i32") => Some(i32::try_from(*v).is_ok()),
                (CaseKey::Int(v), "u32") => Some(u32::try_from(*v).is_ok()),
                (CaseKey::Int(_), "bool") => Some(false),
                (CaseKey::Bool(_), "i32" | "u32") => Some(false),
                (CaseKey::Bool(_), "bool") => Some(true),
                _ => None,
            };
            if fits == Some(false) {
                cx.error_spanned_by(
                    value,
                    format!("case value {key} is not a valid `{switch}` discriminant"),
                );
            }
            if let Some(first) = seen.insert(key.clone(), arm.ident) {
                cx.error_spanned_by(
                    value,
                    format!(
                        "duplicate case {key}: arm `{first}` already has it (RFC 4506 section \
                         4.15: each case value appears once)"
                    ),
                );
            }
        }
    }
}

/// Field rules: a supported type, attributes that fit the type, and no conflicts.
fn check_field(cx: &Ctxt, field: &Field<'_>, in_union: bool) {
    check_field_type(cx, field.ty);
    let a = &field.attrs;
    if let Some(key) = a.discriminant.key() {
        if !in_union {
            cx.error_spanned_by(
                key,
                "`discriminant` marks the field of a union arm that keeps the switch value; a \
                 struct has no discriminant",
            );
        }
        const MSG: &str =
            "the discriminant field is the switch value itself and takes no other attribute";
        for other in [a.max.key(), a.fixed.key(), a.list.key()]
            .into_iter()
            .flatten()
        {
            cx.error_spanned_by(other, MSG);
        }
        if let Some(ddp) = a.ddp.key() {
            cx.ddp_error_spanned_by(ddp, MSG);
        }
        return;
    }
    check_max(cx, field);
    check_fixed(cx, field);
    check_list(cx, field);
    check_ddp(cx, field);
}

/// `max` bounds a variable-length item: opaque, string or array.
fn check_max(cx: &Ctxt, field: &Field<'_>) {
    let Some(key) = field.attrs.max.key() else {
        return;
    };
    match field.shape {
        Shape::Bytes | Shape::XdrString | Shape::Vec(_) => {}
        _ => cx.error_spanned_by(
            key,
            format!(
                "`max` bounds a variable-length item (Bytes, XdrString or Vec<T>); `{}` has no length",
                type_name(field.ty)
            ),
        ),
    }
    if let Some(fixed) = field.attrs.fixed.key() {
        cx.error_spanned_by(
            fixed,
            "an item is either variable-length (`max`) or fixed-length (`fixed`), not both",
        );
    }
    check_u32_literal(cx, field.attrs.max.get());
}

/// `fixed` gives the length of fixed-length opaque data or a fixed array kept in a `Vec`.
fn check_fixed(cx: &Ctxt, field: &Field<'_>) {
    let Some(key) = field.attrs.fixed.key() else {
        return;
    };
    let msg = match field.shape {
        Shape::Bytes | Shape::Vec(_) => None,
        Shape::XdrString => Some(
            "XDR has no fixed-length string (RFC 4506 section 4.11); use Bytes with \
             #[xdr(fixed = N)] for fixed-length opaque data"
                .to_owned(),
        ),
        Shape::Array => Some("`[T; N]` is already fixed-length; remove `fixed`".to_owned()),
        _ => Some(format!(
            "`fixed` gives the length of opaque data (Bytes) or of an array (Vec<T>); `{}` \
             has no length",
            type_name(field.ty)
        )),
    };
    if let Some(msg) = msg {
        cx.error_spanned_by(key, msg);
    }
    check_u32_literal(cx, field.attrs.fixed.get());
}

/// `list` turns a `Vec<T>` into a `*next` linked list (RFC 4506 section 4.19); lists have
/// neither a declared maximum nor a fixed length.
fn check_list(cx: &Ctxt, field: &Field<'_>) {
    let Some(key) = field.attrs.list.key() else {
        return;
    };
    if !matches!(field.shape, Shape::Vec(_)) {
        cx.error_spanned_by(
            key,
            format!(
                "`list` encodes a Vec<T> as an optional-data linked list; `{}` is not a Vec",
                type_name(field.ty)
            ),
        );
    }
    for other in [field.attrs.max.key(), field.attrs.fixed.key()]
        .into_iter()
        .flatten()
    {
        cx.error_spanned_by(
            other,
            "a `*next` linked list has neither a declared maximum nor a fixed length \
             (RFC 4506 section 4.19); remove this",
        );
    }
}

/// RFC 8166 section 6.1 / 4.4.3.2: only opaque data, strings and arrays can move as chunks
/// (optional data keeps its "is present" flag inline).
fn check_ddp(cx: &Ctxt, field: &Field<'_>) {
    let Some(key) = field.attrs.ddp.key() else {
        return;
    };
    if field.attrs.list.is_set() {
        cx.ddp_error_spanned_by(
            key,
            "a linked list cannot be DDP-eligible: each element carries its own \"is present\" \
             flag; use an array (Vec<T> without `list`)",
        );
    } else if !field.shape.is_ddp_capable() {
        cx.ddp_error_spanned_by(
            key,
            format!(
                "`ddp` applies only to opaque (Bytes), string (XdrString) and array (Vec<T>) \
                 fields, which can move as RDMA chunks (RFC 8166 section 6.1); a `{}` is always \
                 encoded inline",
                type_name(field.ty)
            ),
        );
    }
}

fn check_u32_literal(cx: &Ctxt, value: Option<&Expr>) {
    if let Some(value) = value {
        if let Some(CaseKey::Int(v)) = case_key(value) {
            if u32::try_from(v).is_err() {
                cx.error_spanned_by(
                    value,
                    format!("{v} is not a length: XDR lengths are unsigned 32-bit"),
                );
            }
        }
    }
}

/// Types XDR cannot carry as written, with what to use instead.
fn check_field_type(cx: &Ctxt, ty: &Type) {
    let msg = match ungroup(ty) {
        Type::Reference(_) | Type::Ptr(_) => Some(
            "XDR data is owned: use Box<T> for a recursive item, or Option<T> for optional \
             data (RFC 4506 section 4.19)"
                .to_owned(),
        ),
        Type::Slice(_) => Some("use Vec<T> for a variable-length array".to_owned()),
        Type::Array(a) => {
            if is_byte(&a.elem) {
                Some(
                    "fixed-length opaque data is `Bytes` with #[xdr(fixed = N)]; `[u8; N]` \
                     would encode each byte as a 4-byte unit"
                        .to_owned(),
                )
            } else {
                check_field_type(cx, &a.elem);
                None
            }
        }
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last();
            let name = last.map(|s| s.ident.to_string()).unwrap_or_default();
            let arg = last.and_then(|s| super::ast::single_type_arg(&s.arguments));
            match (name.as_str(), arg) {
                ("String" | "str", _) => Some(
                    "use rpcrdma::xdr::XdrString: an XDR string is bytes that need not be \
                     UTF-8 (RFC 4506 section 4.11)"
                        .to_owned(),
                ),
                ("Vec", Some(elem)) if is_byte(elem) => Some(
                    "opaque data is `Bytes` (zero-copy), with #[xdr(max = N)] or \
                     #[xdr(fixed = N)]; `Vec<u8>` would encode each byte as a 4-byte unit"
                        .to_owned(),
                ),
                ("Vec" | "Option" | "Box", Some(elem)) => {
                    check_field_type(cx, elem);
                    None
                }
                ("u8" | "i8" | "u16" | "i16" | "char", _) => Some(format!(
                    "XDR has no `{name}`: integers are 32 bits (RFC 4506 section 4.1); use \
                     u32 or i32"
                )),
                ("usize" | "isize", _) => Some(format!(
                    "`{name}` has a platform-dependent width; use u32/i32 or u64/i64 (hyper)"
                )),
                ("u128" | "i128", _) => Some(format!(
                    "XDR has no 128-bit integer; use u64/i64 (hyper) or fixed-length opaque \
                     data instead of `{name}`"
                )),
                ("HashMap" | "BTreeMap" | "HashSet" | "BTreeSet" | "IndexMap", _) => Some(format!(
                    "XDR has no map or set type; use Vec<Entry> with a struct Entry for \
                         the members of a `{name}`"
                )),
                _ => None,
            }
        }
        Type::Path(_) | Type::Tuple(_) | Type::Macro(_) => None,
        _ => Some("this type has no XDR encoding".to_owned()),
    };
    if let Some(msg) = msg {
        cx.error_spanned_by(ty, format!("unsupported field type: {msg}"));
    }
}

fn is_byte(ty: &Type) -> bool {
    matches!(ungroup(ty), Type::Path(p) if p.path.is_ident("u8") || p.path.is_ident("i8"))
}

/// `ty` as a user wrote it, for messages: `Option<u32>` rather than `Option < u32 >`.
fn type_name(ty: &Type) -> String {
    ty.to_token_stream()
        .to_string()
        .replace(" < ", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" :: ", "::")
        .replace(":: ", "::")
        .replace("& ", "&")
        .replace(" ,", ",")
}
