//! Built-in type names beyond RFC 4506's keywords.

use crate::ir::Prim;

/// C spellings that rpcgen accepts because the C library has XDR routines for them
/// (`xdr_u_int`, `xdr_uint32_t`, `xdr_char`, ...). On the wire each is an XDR `int`,
/// `unsigned int`, `hyper` or `unsigned hyper`.
const RPCGEN_NAMES: &[(&str, Prim)] = &[
    ("char", Prim::Int),
    ("short", Prim::Int),
    ("long", Prim::Int),
    ("u_char", Prim::UInt),
    ("u_short", Prim::UInt),
    ("u_int", Prim::UInt),
    ("u_long", Prim::UInt),
    ("int8_t", Prim::Int),
    ("int16_t", Prim::Int),
    ("int32_t", Prim::Int),
    ("uint8_t", Prim::UInt),
    ("uint16_t", Prim::UInt),
    ("uint32_t", Prim::UInt),
    ("u_int8_t", Prim::UInt),
    ("u_int16_t", Prim::UInt),
    ("u_int32_t", Prim::UInt),
    ("int64_t", Prim::Hyper),
    ("uint64_t", Prim::UHyper),
    ("u_int64_t", Prim::UHyper),
    ("quad_t", Prim::Hyper),
    ("u_quad_t", Prim::UHyper),
    ("bool_t", Prim::Bool),
];

/// Names the RPC-over-RDMA drafts use without defining them; built in only in lenient mode.
pub const LENIENT_ALIASES: &[(&str, Prim)] = &[
    ("uint32", Prim::UInt),
    ("int32", Prim::Int),
    ("uint64", Prim::UHyper),
    ("int64", Prim::Hyper),
];

/// Every built-in name, for "did you mean" suggestions.
pub const BUILTIN_NAMES: &[&str] = &[
    "int", "unsigned", "hyper", "float", "double", "bool", "opaque", "string", "uint32_t",
    "int32_t", "uint64_t", "int64_t", "u_int",
];

/// The primitive a built-in type name stands for; `lenient` adds [`LENIENT_ALIASES`].
pub fn builtin_type(name: &str, lenient: bool) -> Option<Prim> {
    RPCGEN_NAMES
        .iter()
        .chain(if lenient { LENIENT_ALIASES } else { &[] })
        .find(|(n, _)| *n == name)
        .map(|(_, p)| *p)
}

/// The XDR spelling of a primitive.
pub fn prim_xdr(p: Prim) -> &'static str {
    match p {
        Prim::Int => "int",
        Prim::UInt => "unsigned int",
        Prim::Hyper => "hyper",
        Prim::UHyper => "unsigned hyper",
        Prim::Float => "float",
        Prim::Double => "double",
        Prim::Bool => "bool",
    }
}
