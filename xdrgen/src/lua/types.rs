//! One Lua function per XDR type: `D.name(c, tree, off, label)` reads a value at `off`, shows
//! it under `tree` and returns the offset after it; for a union, `A.name(c, tree, off, d)`
//! reads the arm of a discriminant already read. Every struct member, union arm and typedef
//! gets its fields; enums and union discriminants get the names of their values.

use crate::ir::{Disc, EnumMember, Field, Item, ItemKind, Payload, Prim, Repr, Union};

use super::fields::{Fields, Kind};
use super::model::{Resolved, Types};
use super::rpcrdma::Protocol;
use super::writer::{index, string, Writer};

/// Value-name tables (`VS.name = { [value] = "NAME", ... }`), in the order they were made.
#[derive(Debug, Default)]
pub(crate) struct Values {
    tables: Vec<(String, Vec<(i128, String)>)>,
}

impl Values {
    /// Adds the table `name` (the first name of a value wins) and returns its Lua expression.
    pub(crate) fn add(&mut self, name: &str, entries: Vec<(i128, String)>) -> String {
        if !self.tables.iter().any(|(n, _)| n == name) {
            let mut seen = std::collections::HashSet::new();
            let entries = entries
                .into_iter()
                .filter(|(v, _)| seen.insert(*v))
                .collect();
            self.tables.push((name.to_string(), entries));
        }
        index("VS", name)
    }

    /// The tables as Lua.
    pub(crate) fn emit(&self, w: &mut Writer) {
        for (name, entries) in &self.tables {
            if entries.is_empty() {
                w.line(format!("{} = {{}}", index("VS", name)));
                continue;
            }
            w.open(format!("{} = {{", index("VS", name)));
            for (v, n) in entries {
                w.line(format!("[{v}] = {},", string(n)));
            }
            w.close("}");
        }
    }
}

/// Writes the type functions.
pub(crate) struct Emitter<'a, 'b> {
    pub(crate) types: &'b Types<'a>,
    pub(crate) proto: &'b Protocol<'a>,
    pub(crate) fields: Fields,
    pub(crate) values: Values,
    pub(crate) w: Writer,
    /// Loops open in the function being written (their variables are numbered by depth).
    loops: usize,
}

/// Where a value is shown: its field key (`type.member`), its field label and its label in
/// error messages (the member name), and the Lua expression that labels its subtree.
struct Site<'s> {
    key: &'s str,
    label: &'s str,
    node: &'s str,
}

/// The reader function and field kind of a scalar.
fn scalar(p: Prim) -> (&'static str, Kind) {
    match p {
        Prim::Int => ("int32", Kind::I32),
        Prim::UInt => ("uint32", Kind::U32),
        Prim::Hyper => ("int64", Kind::I64),
        Prim::UHyper => ("uint64", Kind::U64),
        Prim::Float => ("float32", Kind::Float),
        Prim::Double => ("float64", Kind::Double),
        Prim::Bool => ("bool", Kind::U32),
    }
}

/// The field key of a typedef's or enum's own value: its name, unless that is the name of
/// one of the fixed fields (`rpcrdma.handle`), which keep their meaning.
fn own_key(name: &str) -> String {
    if super::rpcrdma::FIXED_FIELDS.contains(&name) {
        format!("{name}.value")
    } else {
        name.to_string()
    }
}

fn max_arg(max: &Option<crate::ir::Size>) -> String {
    max.as_ref()
        .map_or_else(|| "nil".to_string(), |s| s.value.to_string())
}

/// The longest common prefix of `names` that ends with `_` (`RDMA2_ERR_` for
/// `RDMA2_ERR_VERS`, `RDMA2_ERR_SEGMENTS`).
fn family(names: &[&str]) -> Option<String> {
    let first = names.first()?;
    let mut len = first.len();
    for n in &names[1..] {
        len = len.min(
            first
                .bytes()
                .zip(n.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    let cut = first[..len].rfind('_')? + 1;
    Some(first[..cut].to_string())
}

impl<'a, 'b> Emitter<'a, 'b> {
    pub(crate) fn new(types: &'b Types<'a>, proto: &'b Protocol<'a>) -> Self {
        Emitter {
            types,
            proto,
            fields: Fields::default(),
            values: Values::default(),
            w: Writer::default(),
            loops: 0,
        }
    }

    /// The function(s) of `item`, if it is a type.
    pub(crate) fn item(&mut self, item: &'a Item) {
        let name = item.xdr_name.as_str();
        match &item.kind {
            ItemKind::Enum { members, .. } => self.enumeration(item, members),
            ItemKind::Struct { fields, list_next } => {
                self.w.comment(&format!("struct {name} ({})", item.origin));
                match list_next {
                    None => self.structure(item, fields, "D", fields.len()),
                    Some(next) => self.list_element(item, fields, next),
                }
                if let Some(keep) = self.proto.rpc_body(name) {
                    self.w.comment(&format!(
                        "{name} as a header body: the members before the RPC message, which \
                         starts at `{}` (its first word)",
                        fields[keep].name
                    ));
                    self.structure(item, fields, "H", keep);
                }
            }
            ItemKind::Union(u) => self.union(item, u),
            ItemKind::Typedef { repr, .. } => {
                let key = own_key(name);
                self.w.comment(&format!("typedef {name} ({})", item.origin));
                self.w.open(format!(
                    "{} = function(c, tree, off, label)",
                    index("D", name)
                ));
                self.site(
                    repr,
                    &Site {
                        key: &key,
                        label: name,
                        node: "label",
                    },
                    "tree",
                );
                self.w.line("return off");
                self.w.close("end");
                self.w.line("");
            }
            ItemKind::Program(_) => {
                self.w.comment(&format!(
                    "program {name} ({}): its calls are ONC RPC's to dissect",
                    item.origin
                ));
                self.w.line("");
            }
            ItemKind::Const { .. } | ItemKind::StrConst { .. } => {}
        }
    }

    /// A linked-list element `L` (its last member `L *next`): `L.name` reads one entry (the
    /// members before `next`), `D.name` a value of `L`, which is the entry and the list its
    /// `next` continues (RFC 4506 section 4.19).
    fn list_element(&mut self, item: &Item, fields: &'a [Field], next: &str) {
        let name = item.xdr_name.as_str();
        self.structure(item, fields, "L", fields.len());
        let ff = self.fields.get(
            &format!("{name}.{next}"),
            &format!("{next} follows"),
            Kind::U32,
            Some("VS.bool".into()),
        );
        self.w.comment(&format!(
            "a value of {name}: its entry, then the list its `{next}` continues"
        ));
        self.w.open(format!(
            "{} = function(c, tree, off, label)",
            index("D", name)
        ));
        self.w.line(format!(
            "return list(c, tree, off, label, {}, {ff}, true)",
            index("L", name)
        ));
        self.w.close("end");
        self.w.line("");
    }

    fn enumeration(&mut self, item: &Item, members: &[EnumMember]) {
        let name = item.xdr_name.as_str();
        let vs = self.values.add(
            name,
            members
                .iter()
                .map(|m| (m.value.into(), m.name.clone()))
                .collect(),
        );
        let f = self
            .fields
            .get(&own_key(name), name, Kind::I32, Some(vs.clone()));
        self.w.comment(&format!("enum {name} ({})", item.origin));
        self.w.open(format!(
            "{} = function(c, tree, off, label)",
            index("D", name)
        ));
        self.w.line(format!(
            "return (enum(c, tree, {f}, off, {}, {vs}))",
            string(name)
        ));
        self.w.close("end");
        self.w.line("");
    }

    /// `table.name`: the struct's members up to (not including) `upto`.
    fn structure(&mut self, item: &Item, fields: &'a [Field], table: &str, upto: usize) {
        let name = item.xdr_name.as_str();
        let func = index(table, name);
        self.w
            .open(format!("{func} = function(c, tree, off, label)"));
        // The chunk-list and property views (RFC 8166 section 4.1; the draft's section 4.1).
        if table == "D" && self.types.is_write_chunk(name) {
            self.w.comment("a Write chunk, shown as one");
            self.w.line(
                "return (write_chunk(c, tree, off, label, \"write_chunk\", nil, \"Write chunk\"))",
            );
        } else if table == "D" && self.types.is_segment(name) {
            self.w.comment("a segment, shown as one");
            self.w.line("need(c, off, 16, label)");
            self.w.line("show_segment(c, tree, off, label)");
            self.w.line("return off + 16");
        } else if table == "D" && self.proto.propval == Some(name) {
            self.w
                .comment("a transport property, its value dissected by its own type (PROPS)");
            let which = &fields[0].name;
            let data = &fields[1].name;
            let fw = self.fields.get(
                &format!("{name}.{which}"),
                which,
                Kind::U32,
                Some("VS.propid".into()),
            );
            let fl = self.fields.get(
                &format!("{name}.{data}.len"),
                &format!("{data} length"),
                Kind::U32,
                None,
            );
            let fd = self
                .fields
                .get(&format!("{name}.{data}"), data, Kind::Bytes, None);
            self.w.line(format!(
                "return propval(c, tree, off, label, {fw}, {fl}, {fd})"
            ));
        } else {
            let recursive = item.props.recursive;
            if recursive {
                self.w.line(format!("enter(c, {})", string(name)));
            }
            self.w.line(format!(
                "local t, start = open(c, tree, off, label .. {})",
                string(&format!(" ({name})"))
            ));
            for f in &fields[..upto] {
                let key = format!("{name}.{}", f.name);
                let node = string(&f.name);
                self.site(
                    &f.repr,
                    &Site {
                        key: &key,
                        label: &f.name,
                        node: &node,
                    },
                    "t",
                );
            }
            self.w.line("close(t, start, off)");
            if recursive {
                self.w.line("leave(c)");
            }
            self.w.line("return off");
        }
        self.w.close("end");
        self.w.line("");
    }

    fn union(&mut self, item: &'a Item, u: &'a Union) {
        let name = item.xdr_name.as_str();
        let disc = u.disc_name.as_deref().unwrap_or("discriminant");
        let disc_type = match &u.disc {
            Disc::Int => "int",
            Disc::UInt => "unsigned int",
            Disc::Bool => "bool",
            Disc::Enum(e) => e.as_str(),
        };
        self.w.comment(&format!(
            "union {name} switch ({disc_type} {disc}) ({})",
            item.origin
        ));
        // The arms.
        self.w
            .open(format!("{} = function(c, t, off, d)", index("A", name)));
        let mut first = true;
        for arm in &u.arms {
            let test = arm
                .labels
                .iter()
                .map(|l| format!("d == {}", l.value))
                .collect::<Vec<_>>()
                .join(" or ");
            let names: Vec<String> = arm
                .labels
                .iter()
                .map(|l| l.name.clone().unwrap_or_else(|| l.value.to_string()))
                .collect();
            let line = format!("if {test} then -- {}", names.join(", "));
            if first {
                self.w.open(line);
                first = false;
            } else {
                self.w.reopen(format!("else{line}"));
            }
            self.payload(name, &arm.payload);
        }
        match &u.default {
            Some(arm) => {
                if !first {
                    self.w.reopen("else -- default");
                }
                self.payload(name, &arm.payload);
            }
            None => {
                if !first {
                    self.w.reopen("else");
                }
                // RFC 4506 section 4.15: without a default arm, other values are invalid.
                self.w.line(format!(
                    "malformed(off, string.format({}, d))",
                    string(&format!("{name}: no arm for {disc} %d"))
                ));
            }
        }
        if !first {
            self.w.close("end");
        }
        self.w.line("return off");
        self.w.close("end");
        self.w.line("");
        // The union: its discriminant, then the arm.
        let key = format!("{name}.{disc}");
        let (reader, f, names) = match &u.disc {
            Disc::Enum(e) => {
                let vs = index("VS", e);
                let f = self.fields.get(&key, disc, Kind::I32, Some(vs.clone()));
                ("enum", f, Some(vs))
            }
            Disc::Bool => {
                let f = self
                    .fields
                    .get(&key, disc, Kind::U32, Some("VS.bool".into()));
                ("bool", f, None)
            }
            Disc::Int | Disc::UInt => {
                let vs = self.label_names(name, disc, u);
                let kind = if u.disc == Disc::Int {
                    Kind::I32
                } else {
                    Kind::U32
                };
                let f = self.fields.get(&key, disc, kind, vs);
                (
                    if u.disc == Disc::Int {
                        "int32"
                    } else {
                        "uint32"
                    },
                    f,
                    None,
                )
            }
        };
        self.w.open(format!(
            "{} = function(c, tree, off, label)",
            index("D", name)
        ));
        if item.props.recursive {
            self.w.line(format!("enter(c, {})", string(name)));
        }
        self.w.line(format!(
            "local t, start = open(c, tree, off, label .. {})",
            string(&format!(" ({name})"))
        ));
        self.w.line("local d");
        let extra = names.map(|vs| format!(", {vs}")).unwrap_or_default();
        self.w.line(format!(
            "off, d = {reader}(c, t, {f}, off, {}{extra})",
            string(disc)
        ));
        if u.disc == Disc::Bool {
            self.w.line("d = d and 1 or 0");
        }
        self.w
            .line(format!("off = {}(c, t, off, d)", index("A", name)));
        self.w.line("close(t, start, off)");
        if item.props.recursive {
            self.w.line("leave(c)");
        }
        self.w.line("return off");
        self.w.close("end");
        self.w.line("");
    }

    /// Names for an integer discriminant's values: its case labels, and every constant of
    /// their family (`RDMA2_ERR_*` for the labels of `rpcrdma2_error`), so that values an
    /// extension adds for the default arm have names too (the draft's section 9.3).
    fn label_names(&mut self, union: &str, disc: &str, u: &Union) -> Option<String> {
        let labels: Vec<(&str, i64)> = u
            .arms
            .iter()
            .flat_map(|a| &a.labels)
            .filter_map(|l| l.name.as_deref().map(|n| (n, l.value)))
            .collect();
        if labels.is_empty() {
            return None;
        }
        let mut entries: Vec<(i128, String)> = labels
            .iter()
            .map(|(n, v)| (i128::from(*v), n.to_string()))
            .collect();
        if labels.len() >= 2 {
            let names: Vec<&str> = labels.iter().map(|(n, _)| *n).collect();
            if let Some(prefix) = family(&names) {
                entries.extend(
                    self.types
                        .consts()
                        .filter(|(n, _)| n.starts_with(&prefix))
                        .map(|(n, v)| (v, n.to_string())),
                );
            }
        }
        entries.sort_by_key(|(v, _)| *v);
        Some(self.values.add(&format!("{union}.{disc}"), entries))
    }

    fn payload(&mut self, union: &str, p: &'a Payload) {
        let fields: &[Field] = match p {
            Payload::Void => {
                self.w.comment("void");
                return;
            }
            Payload::One(f) => std::slice::from_ref(f),
            Payload::Many(fs) => fs,
        };
        for f in fields {
            let key = format!("{union}.{}", f.name);
            let node = string(&f.name);
            self.site(
                &f.repr,
                &Site {
                    key: &key,
                    label: &f.name,
                    node: &node,
                },
                "t",
            );
        }
    }

    /// Statements that read one value of shape `repr` at `off` under `tree`.
    fn site(&mut self, repr: &'a Repr, s: &Site, tree: &str) {
        let what = string(s.label);
        match self.types.resolve(repr) {
            Resolved::Prim(p) => {
                let (reader, kind) = scalar(p);
                let values = (p == Prim::Bool).then(|| "VS.bool".to_string());
                let f = self.fields.get(s.key, s.label, kind, values);
                self.w
                    .line(format!("off = {reader}(c, {tree}, {f}, off, {what})"));
            }
            Resolved::Enum(e) => {
                let vs = index("VS", e);
                let f = self.fields.get(s.key, s.label, Kind::I32, Some(vs.clone()));
                self.w
                    .line(format!("off = enum(c, {tree}, {f}, off, {what}, {vs})"));
            }
            Resolved::Call(n) => {
                self.w.line(format!(
                    "off = {}(c, {tree}, off, {})",
                    index("D", n),
                    s.node
                ));
            }
            Resolved::Shape(shape) => self.shape(shape, s, tree),
        }
    }

    fn shape(&mut self, shape: &'a Repr, s: &Site, tree: &str) {
        let what = string(s.label);
        match shape {
            Repr::FixedOpaque(n) => {
                let f = self.fields.get(s.key, s.label, Kind::Bytes, None);
                self.w.line(format!(
                    "off = fixed_bytes(c, {tree}, {f}, off, {}, {what})",
                    n.value
                ));
            }
            Repr::VarOpaque(max) | Repr::Str(max) => {
                let kind = if matches!(shape, Repr::Str(_)) {
                    Kind::Str
                } else {
                    Kind::Bytes
                };
                let fl = self.fields.get(
                    &format!("{}.len", s.key),
                    &format!("{} length", s.label),
                    Kind::U32,
                    None,
                );
                let fd = self.fields.get(s.key, s.label, kind, None);
                self.w.line(format!(
                    "off = var_bytes(c, {tree}, {fl}, {fd}, off, {}, {what})",
                    max_arg(max)
                ));
            }
            Repr::FixedArray(elem, n) => {
                let min = self.types.min_len(elem);
                self.array(s, elem, false, |e, a, i| {
                    e.w.line(format!(
                        "local {a}, s{i} = open(c, {tree}, off, {} .. {})",
                        s.node,
                        string(&format!(": {} elements", n.value))
                    ));
                    e.w.line(format!("room(c, off, {}, {min}, {what})", n.value));
                    format!("for i{i} = 1, {} do", n.value)
                });
            }
            Repr::VarArray(elem, max) => {
                let min = self.types.min_len(elem);
                let fc = self.fields.get(
                    &format!("{}.count", s.key),
                    &format!("{} count", s.label),
                    Kind::U32,
                    None,
                );
                self.array(s, elem, true, |e, a, i| {
                    e.w.line(format!(
                        "local {a}, s{i} = open(c, {tree}, off, {})",
                        s.node
                    ));
                    e.w.line(format!("local n{i}"));
                    e.w.line(format!(
                        "off, n{i} = count(c, {a}, {fc}, off, {}, {min}, {what})",
                        max_arg(max)
                    ));
                    format!("for i{i} = 1, n{i} do")
                });
            }
            Repr::Optional(elem) => match self.types.resolve(elem) {
                // RFC 8166 section 4.1.3 (and the draft's rpcrdma2_chunk_lists): the Reply chunk.
                Resolved::Call(w) if self.types.is_write_chunk(w) => {
                    self.w
                        .line(format!("off = reply_chunk(c, {tree}, off, {})", s.node));
                }
                _ => {
                    let fp = self.fields.get(
                        &format!("{}.present", s.key),
                        &format!("{} present", s.label),
                        Kind::U32,
                        Some("VS.bool".into()),
                    );
                    self.w.open("do");
                    self.w.line("local present");
                    self.w
                        .line(format!("off, present = bool(c, {tree}, {fp}, off, {what})"));
                    self.w.open("if present then");
                    self.site(elem, s, tree);
                    self.w.close("end");
                    self.w.close("end");
                }
            },
            Repr::List(l) if self.types.is_read_list(l) => {
                self.w
                    .line(format!("off = read_list(c, {tree}, off, {})", s.node));
            }
            Repr::List(l) if self.types.is_write_list(l) => {
                self.w
                    .line(format!("off = write_list(c, {tree}, off, {})", s.node));
            }
            Repr::List(l) | Repr::NonEmptyList(l) => {
                let ff = self.fields.get(
                    &format!("{}.follows", s.key),
                    &format!("{} follows", s.label),
                    Kind::U32,
                    Some("VS.bool".into()),
                );
                let first = matches!(shape, Repr::NonEmptyList(_));
                self.w.line(format!(
                    "off = list(c, {tree}, off, {}, {}, {ff}, {first})",
                    s.node,
                    index("L", l)
                ));
            }
            // resolve() looked through these.
            Repr::Prim(_) | Repr::Named(_) | Repr::Boxed(_) => self.site(shape, s, tree),
        }
    }

    /// An array: `head` writes the lines before the loop and returns the `for` line.
    fn array(
        &mut self,
        s: &Site,
        elem: &'a Repr,
        counted: bool,
        head: impl FnOnce(&mut Self, &str, usize) -> String,
    ) {
        let i = self.loops + 1;
        self.loops += 1;
        let a = format!("a{i}");
        self.w.open("do");
        let for_line = head(self, &a, i);
        self.w.open(for_line);
        let node = format!("{} .. \"[\" .. i{i} .. \"]\"", s.node);
        self.site(
            elem,
            &Site {
                key: s.key,
                label: s.label,
                node: &node,
            },
            &a,
        );
        self.w.close("end");
        if counted {
            self.w.line(format!(
                "close({a}, s{i}, off, \": \" .. n{i} .. \" elements\")"
            ));
        } else {
            self.w.line(format!("close({a}, s{i}, off)"));
        }
        self.w.close("end");
        self.loops -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::family;

    #[test]
    fn families_end_at_an_underscore() {
        assert_eq!(
            family(&["RDMA2_ERR_VERS", "RDMA2_ERR_READ_CHUNKS"]).as_deref(),
            Some("RDMA2_ERR_")
        );
        assert_eq!(family(&["A_B", "C_D"]), None);
        assert_eq!(
            family(&["RDMA_ERR_VERS", "RDMA_ERR_VERSX"]).as_deref(),
            Some("RDMA_ERR_")
        );
    }
}
