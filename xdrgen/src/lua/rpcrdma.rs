//! What the XDR does not say and the dissector needs: which type is the header of each
//! RPC-over-RDMA version, which body goes with which header type, which type a transport
//! property's value has. The drafts name things so that it can be read from the names:
//!
//! * version 1 (RFC 8166 section 4.2): `struct rpcrdma1_msg { rdma_xid; rdma_vers;
//!   rdma_credit; rpcrdma1_body rdma_body; }`, the body a union on `enum rpcrdma1_proc`; the
//!   RPC message follows `RDMA_MSG` and `RDMA_MSGP` headers.
//! * version 2 (draft-cel-nfsv4-rpcrdma-version-two sections 3.1, 3.2): `rpcrdma_common` (the
//!   four words every version keeps) inside `rpcrdma2_hdr_prefix`, then `rdma_flags`, whose
//!   bits are the constants `RPCRDMA2_F_*` (section 9.4).
//! * header types (sections 5.2, 9.1): the constant `RDMA2_FOO` goes with the struct or union
//!   `rpcrdma2_foo` that no other type uses (`RDMA2_ERROR` with `rpcrdma2_error`;
//!   `RDMA2_ERR_VERS` does not make a header type of `rpcrdma2_err_vers`, which
//!   `rpcrdma2_error` uses). A body whose last member is `rdma_rpc_first_word` is followed by
//!   the RPC message, which starts with that word (section 5.3.1).
//! * transport properties (sections 4.1, 9.2): the constant `RDMA2_PROPID_FOO` goes with the
//!   type `rpcrdma2_prop_foo`, the type of the `rdma_data` of a `rpcrdma2_propval` whose
//!   `rdma_which` is `RDMA2_PROPID_FOO`.
//!
//! An extension that follows these names (section 9) is dissected with no change here.

use crate::ir::{Item, ItemKind, Prim, Repr};

use super::fields::Kind;
use super::model::{Resolved, Types};
use super::types::Emitter;
use super::writer::{index, string};

/// Version 1's header.
#[derive(Debug)]
pub(crate) struct V1<'a> {
    msg: &'a Item,
    body: &'a str,
    procs: &'a str,
    /// The procedures after which the RPC message follows, with their names.
    rpc: Vec<(i32, &'a str)>,
}

/// A version 2 header type.
#[derive(Debug)]
pub(crate) struct HeaderType<'a> {
    name: &'a str,
    value: u32,
    body: &'a Item,
    /// The index of `rdma_rpc_first_word` when the RPC message follows the body.
    rpc: Option<usize>,
}

/// Version 2's header.
#[derive(Debug)]
pub(crate) struct V2<'a> {
    prefix: &'a Item,
    flags: Vec<(&'a str, u32)>,
    htypes: Vec<HeaderType<'a>>,
}

/// A transport property.
#[derive(Debug)]
pub(crate) struct Prop<'a> {
    name: &'a str,
    value: u32,
    ty: Option<&'a str>,
}

/// The versions and properties found in the input.
#[derive(Debug)]
pub(crate) struct Protocol<'a> {
    pub(crate) v1: Option<V1<'a>>,
    pub(crate) v2: Option<V2<'a>>,
    pub(crate) props: Vec<Prop<'a>>,
    /// `rpcrdma2_propval`, when it has the draft's shape (`uint32 rdma_which; opaque
    /// rdma_data<>;`).
    pub(crate) propval: Option<&'a str>,
}

/// The keys of the fields the fixed part uses (`rpcrdma.<key>`).
pub(crate) const FIXED_FIELDS: &[&str] = &[
    "xid",
    "vers",
    "credit",
    "htype",
    "flags",
    "body",
    "read_list",
    "read_chunk",
    "write_list",
    "write_chunk",
    "reply_chunk",
    "segment",
    "reads",
    "writes",
    "reply",
    "chunk_length",
    "segments",
    "position",
    "handle",
    "length",
    "offset",
    "expert",
];

/// The constant's value as a header word.
fn word(v: i128) -> Option<u32> {
    u32::try_from(v).ok()
}

impl<'a> Protocol<'a> {
    /// Reads the conventions off `types`; at least one version's header must be there.
    pub(crate) fn find(types: &Types<'a>) -> Result<Protocol<'a>, String> {
        let v1 = Self::v1(types)?;
        let v2 = Self::v2(types)?;
        if v1.is_none() && v2.is_none() {
            return Err(
                "no RPC-over-RDMA header in the input: a dissector needs `struct \
                        rpcrdma1_msg` (version 1, RFC 8166) or `struct rpcrdma_common` and \
                        `struct rpcrdma2_hdr_prefix` (version 2)"
                    .into(),
            );
        }
        let props = types
            .consts()
            .filter_map(|(name, value)| {
                let suffix = name.strip_prefix("RDMA2_PROPID_")?;
                let ty = format!("rpcrdma2_prop_{}", suffix.to_ascii_lowercase());
                Some(Prop {
                    name,
                    value: word(value)?,
                    ty: types.get(&ty).map(|i| i.xdr_name.as_str()),
                })
            })
            .collect();
        let propval = types.get("rpcrdma2_propval").and_then(|i| match &i.kind {
            ItemKind::Struct { fields, .. } if fields.len() == 2 => {
                let which = matches!(types.resolve(&fields[0].repr), Resolved::Prim(Prim::UInt));
                let data = matches!(
                    types.resolve(&fields[1].repr),
                    Resolved::Shape(Repr::VarOpaque(_))
                );
                (which && data).then_some(i.xdr_name.as_str())
            }
            _ => None,
        });
        Ok(Protocol {
            v1,
            v2,
            props,
            propval,
        })
    }

    fn v1(types: &Types<'a>) -> Result<Option<V1<'a>>, String> {
        let Some(msg) = types.get("rpcrdma1_msg") else {
            return Ok(None);
        };
        let bad = || {
            format!(
                "`rpcrdma1_msg` ({}) is not RFC 8166's header: expected three uint32 members \
                 and a union on `enum rpcrdma1_proc`",
                msg.origin
            )
        };
        let ItemKind::Struct { fields, .. } = &msg.kind else {
            return Err(bad());
        };
        if fields.len() != 4
            || !fields[..3]
                .iter()
                .all(|f| matches!(types.resolve(&f.repr), Resolved::Prim(Prim::UInt)))
        {
            return Err(bad());
        }
        let Resolved::Call(body) = types.resolve(&fields[3].repr) else {
            return Err(bad());
        };
        let Some(ItemKind::Union(u)) = types.get(body).map(|i| &i.kind) else {
            return Err(bad());
        };
        let crate::ir::Disc::Enum(procs) = &u.disc else {
            return Err(bad());
        };
        let Some(ItemKind::Enum { members, .. }) = types.get(procs).map(|i| &i.kind) else {
            return Err(bad());
        };
        // RFC 8166 section 4.2.1 (RDMA_MSG) and RFC 5666 section 4.3 (RDMA_MSGP): the RPC
        // message follows the header.
        let rpc = members
            .iter()
            .filter(|m| m.name == "RDMA_MSG" || m.name == "RDMA_MSGP")
            .map(|m| (m.value, m.name.as_str()))
            .collect();
        Ok(Some(V1 {
            msg,
            body,
            procs,
            rpc,
        }))
    }

    fn v2(types: &Types<'a>) -> Result<Option<V2<'a>>, String> {
        let (Some(common), Some(prefix)) = (
            types.get("rpcrdma_common"),
            types.get("rpcrdma2_hdr_prefix"),
        ) else {
            return Ok(None);
        };
        let uint = |r: &'a Repr| matches!(types.resolve(r), Resolved::Prim(Prim::UInt));
        let common_ok = matches!(&common.kind, ItemKind::Struct { fields, .. }
            if fields.len() == 4 && fields.iter().all(|f| uint(&f.repr)));
        let prefix_ok = matches!(&prefix.kind, ItemKind::Struct { fields, .. }
            if fields.len() == 2
                && matches!(types.resolve(&fields[0].repr), Resolved::Call("rpcrdma_common"))
                && uint(&fields[1].repr));
        if !common_ok || !prefix_ok {
            return Err(format!(
                "`rpcrdma_common` ({}) and `rpcrdma2_hdr_prefix` ({}) are not the draft's \
                 (section 3.1: four uint32 words; section 3.2: rpcrdma_common and uint32 \
                 rdma_flags)",
                common.origin, prefix.origin
            ));
        }
        let flags = types
            .consts()
            .filter(|(n, _)| n.starts_with("RPCRDMA2_F_"))
            .filter_map(|(n, v)| Some((n, word(v)?)))
            .collect();
        let used = types.used_by_others();
        let mut htypes: Vec<HeaderType<'a>> = Vec::new();
        for (name, value) in types.consts() {
            let Some(suffix) = name.strip_prefix("RDMA2_") else {
                continue;
            };
            let ty = format!("rpcrdma2_{}", suffix.to_ascii_lowercase());
            let Some(body) = types.get(&ty) else {
                continue;
            };
            let fields = match &body.kind {
                ItemKind::Struct { fields, .. } => Some(fields),
                ItemKind::Union(_) => None,
                _ => continue,
            };
            if used.contains(ty.as_str()) || ty == "rpcrdma2_hdr_prefix" {
                continue;
            }
            let Some(value) = word(value) else {
                continue;
            };
            if let Some(other) = htypes.iter().find(|h| h.value == value) {
                return Err(format!(
                    "header types `{}` and `{name}` have the same value {value}",
                    other.name
                ));
            }
            let rpc = fields.and_then(|f| {
                let last = f.last()?;
                (last.name == "rdma_rpc_first_word" && uint(&last.repr)).then_some(f.len() - 1)
            });
            htypes.push(HeaderType {
                name,
                value,
                body,
                rpc,
            });
        }
        Ok(Some(V2 {
            prefix,
            flags,
            htypes,
        }))
    }

    /// For a header body followed by the RPC message: the index of its first word.
    pub(crate) fn rpc_body(&self, name: &str) -> Option<usize> {
        self.v2
            .as_ref()?
            .htypes
            .iter()
            .find(|h| h.body.xdr_name == name)?
            .rpc
    }

    /// The fields of the header and the chunk views, which the fixed part uses by name.
    pub(crate) fn fixed_fields(&self, e: &mut Emitter<'a, '_>) {
        let f = &mut e.fields;
        f.get("xid", "XID", Kind::U32, None);
        f.get("vers", "Version", Kind::U32, None);
        f.get("credit", "Credits", Kind::U32, None);
        f.get("htype", "Header type", Kind::U32, None);
        if let Some(v2) = &self.v2 {
            f.get("flags", "Flags", Kind::U32, None);
            for (name, value) in &v2.flags {
                let short = name.trim_start_matches("RPCRDMA2_F_").to_ascii_lowercase();
                f.get(&format!("flags.{short}"), name, Kind::Bit(*value), None);
            }
        }
        f.get("body", "Header body", Kind::Bytes, None);
        f.get("read_list", "Read list", Kind::Node, None);
        f.get("read_chunk", "Read chunk", Kind::Node, None);
        f.get("write_list", "Write list", Kind::Node, None);
        f.get("write_chunk", "Write chunk", Kind::Node, None);
        f.get("reply_chunk", "Reply chunk", Kind::Node, None);
        f.get("segment", "Segment", Kind::Node, None);
        f.get("reads", "Read chunks", Kind::U32, None);
        f.get("writes", "Write chunks", Kind::U32, None);
        f.get("reply", "Reply chunks", Kind::U32, None);
        f.get("chunk_length", "Chunk length", Kind::U32, None);
        f.get("segments", "Segments", Kind::U32, None);
        f.get("position", "Position", Kind::U32, None);
        f.get("handle", "Handle", Kind::U32, None);
        f.get("length", "Length", Kind::U32, None);
        f.get("offset", "Offset", Kind::U64, None);
        let props = self
            .props
            .iter()
            .map(|p| (i128::from(p.value), p.name.to_string()))
            .collect();
        e.values.add("propid", props);
        e.values.add(
            "bool",
            vec![(0, "FALSE".to_string()), (1, "TRUE".to_string())],
        );
    }

    /// `V1`, `V2` and `PROPS`: the tables the fixed part reads.
    pub(crate) fn emit(&self, e: &mut Emitter<'a, '_>) {
        let w = &mut e.w;
        if let Some(v1) = &self.v1 {
            w.comment(&format!(
                "Version 1 (RFC 8166 section 4.2): {} ({}), its body the union {} on enum {}.",
                v1.msg.xdr_name, v1.msg.origin, v1.body, v1.procs
            ));
            w.open("V1 = {");
            w.line(format!("names = {},", index("VS", v1.procs)));
            w.line(format!("body = {},", index("A", v1.body)));
            let rpc: Vec<String> = v1
                .rpc
                .iter()
                .map(|(v, _)| format!("[{v}] = true"))
                .collect();
            let names: Vec<&str> = v1.rpc.iter().map(|(_, n)| *n).collect();
            w.comment(&format!("the RPC message follows: {}", names.join(", ")));
            w.line(format!("rpc = {{ {} }},", rpc.join(", ")));
            w.close("}");
            w.line("");
        }
        if let Some(v2) = &self.v2 {
            w.comment(&format!(
                "Version 2 (the draft's sections 3.2, 5): {} ({}), then the body of the header \
                 type.",
                v2.prefix.xdr_name, v2.prefix.origin
            ));
            w.open("V2 = {");
            let flags: Vec<String> = v2
                .flags
                .iter()
                .map(|(n, _)| {
                    let short = n.trim_start_matches("RPCRDMA2_F_").to_ascii_lowercase();
                    index("F", &format!("flags.{short}"))
                })
                .collect();
            w.line(format!("flags = {{ {} }},", flags.join(", ")));
            let known = v2.flags.iter().fold(0u32, |m, (_, v)| m | v);
            w.line(format!("known_flags = 0x{known:08x},"));
            let response = v2
                .flags
                .iter()
                .find(|(n, _)| *n == "RPCRDMA2_F_RESPONSE")
                .map_or(0, |(_, v)| *v);
            w.line(format!("response = 0x{response:08x},"));
            w.open("htypes = {");
            for h in &v2.htypes {
                let table = if h.rpc.is_some() { "H" } else { "D" };
                let rpc = if h.rpc.is_some() { ", rpc = true" } else { "" };
                w.line(format!(
                    "[{}] = {{ name = {}, type = {}, body = {}{rpc} }},",
                    h.value,
                    string(h.name),
                    string(&h.body.xdr_name),
                    index(table, &h.body.xdr_name)
                ));
            }
            w.close("},");
            w.close("}");
            w.line("");
        }
        if !self.props.is_empty() {
            w.comment("Transport properties (the draft's section 4): RDMA2_PROPID_FOO <-> rpcrdma2_prop_foo.");
            w.open("PROPS = {");
            for p in &self.props {
                let (ty, dissect) = match p.ty {
                    Some(t) => (string(t), index("D", t)),
                    None => ("nil".into(), "nil".into()),
                };
                w.line(format!(
                    "[{}] = {{ name = {}, type = {ty}, dissect = {dissect} }},",
                    p.value,
                    string(p.name)
                ));
            }
            w.close("}");
            w.line("");
        }
    }
}
