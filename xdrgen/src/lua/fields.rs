//! The dissector's fields (`ProtoField`s): one per place a value is shown, named
//! `rpcrdma.<type>.<member>` after the XDR (`rpcrdma.rpcrdma2_segment.rdma_handle`), plus the
//! fixed ones of the header and the chunk views (`rpcrdma.xid`, `rpcrdma.handle`).

use std::collections::HashMap;

use super::writer::{index, string, Writer};

/// The protocol's filter name, the first part of every field name.
pub(crate) const PROTO: &str = "rpcrdma";

/// What a field holds (its `ProtoField` constructor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    U32,
    I32,
    U64,
    I64,
    Float,
    Double,
    Bytes,
    Str,
    /// A subtree that is a field itself (filterable), no value.
    Node,
    /// One bit (or bits) of a 32-bit word.
    Bit(u32),
}

#[derive(Debug)]
struct Def {
    key: String,
    abbrev: String,
    label: String,
    kind: Kind,
    hex: bool,
    values: Option<String>,
}

/// The fields, in the order they were first asked for.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    defs: Vec<Def>,
    by_key: HashMap<String, usize>,
    abbrevs: HashMap<String, usize>,
}

/// Whether a value is clearer in hexadecimal: identifiers and addresses, by their XDR name.
fn hex_name(label: &str) -> bool {
    let l = label.to_ascii_lowercase();
    [
        "xid", "handle", "offset", "flags", "stag", "cookie", "verifier",
    ]
    .iter()
    .any(|w| l.contains(w))
}

/// `rpcrdma.` + `key`, lower case, with only the characters Wireshark allows in a field name.
fn abbrev_for(key: &str) -> String {
    let body: String = key
        .chars()
        .map(|c| match c {
            'A'..='Z' => c.to_ascii_lowercase(),
            'a'..='z' | '0'..='9' | '_' | '-' | '.' => c,
            _ => '_',
        })
        .collect();
    format!("{PROTO}.{body}")
}

impl Fields {
    /// The Lua expression of the field `key` (created on first use). A key asked for again
    /// with another kind gets a field of its own (`key.2`).
    pub(crate) fn get(
        &mut self,
        key: &str,
        label: &str,
        kind: Kind,
        values: Option<String>,
    ) -> String {
        let base = key;
        let mut key = base.to_string();
        let mut n = 1;
        while let Some(&i) = self.by_key.get(&key) {
            if self.defs[i].kind == kind && self.defs[i].values == values {
                return index("F", &key);
            }
            n += 1;
            key = format!("{base}.{n}");
        }
        let mut abbrev = abbrev_for(&key);
        let mut k = 1;
        while self.abbrevs.contains_key(&abbrev) {
            k += 1;
            abbrev = format!("{}_{k}", abbrev_for(&key));
        }
        let hex = matches!(kind, Kind::U32 | Kind::U64) && values.is_none() && hex_name(label);
        self.by_key.insert(key.clone(), self.defs.len());
        self.abbrevs.insert(abbrev.clone(), self.defs.len());
        self.defs.push(Def {
            key: key.clone(),
            abbrev,
            label: label.to_string(),
            kind,
            hex,
            values,
        });
        index("F", &key)
    }

    /// `field("key", ProtoField.x(...))` for every field, in order.
    pub(crate) fn emit(&self, w: &mut Writer) {
        for d in &self.defs {
            let abbrev = string(&d.abbrev);
            let label = string(&d.label);
            let base = if d.hex { "base.HEX" } else { "base.DEC" };
            let values = d.values.as_deref().unwrap_or("nil");
            let ctor = match &d.kind {
                Kind::U32 => format!("ProtoField.uint32({abbrev}, {label}, {base}, {values})"),
                Kind::I32 => format!("ProtoField.int32({abbrev}, {label}, base.DEC, {values})"),
                Kind::U64 => format!("ProtoField.uint64({abbrev}, {label}, {base})"),
                Kind::I64 => format!("ProtoField.int64({abbrev}, {label}, base.DEC)"),
                Kind::Float => format!("ProtoField.float({abbrev}, {label})"),
                Kind::Double => format!("ProtoField.double({abbrev}, {label})"),
                Kind::Bytes => format!("ProtoField.bytes({abbrev}, {label})"),
                Kind::Str => format!("ProtoField.string({abbrev}, {label})"),
                Kind::Node => format!("ProtoField.none({abbrev}, {label})"),
                Kind::Bit(mask) => {
                    format!("ProtoField.bool({abbrev}, {label}, 32, nil, 0x{mask:08x})")
                }
            };
            w.line(format!("field({}, {ctor})", string(&d.key)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_field_per_kind() {
        let mut f = Fields::default();
        let a = f.get("s.x", "x", Kind::U32, None);
        assert_eq!(a, "F[\"s.x\"]");
        assert_eq!(f.get("s.x", "x", Kind::U32, None), a);
        assert_eq!(f.get("s.x", "x", Kind::Bytes, None), "F[\"s.x.2\"]");
        assert_eq!(f.get("s.x", "x", Kind::Str, None), "F[\"s.x.3\"]");
        assert_eq!(f.get("xid", "XID", Kind::U32, None), "F.xid");
    }

    #[test]
    fn names_are_lower_case_and_hex_where_they_name_handles() {
        let mut f = Fields::default();
        f.get("Foo.rdma_Handle", "rdma_Handle", Kind::U32, None);
        f.get("foo.rdma_handle", "rdma_handle", Kind::U32, None);
        let mut w = Writer::default();
        f.emit(&mut w);
        let out = w.finish();
        assert!(
            out.contains(
                r#"ProtoField.uint32("rpcrdma.foo.rdma_handle", "rdma_Handle", base.HEX, nil)"#
            ),
            "{out}"
        );
        assert!(out.contains(r#""rpcrdma.foo.rdma_handle_2""#), "{out}");
    }
}
