//! The items of all parts by name, and what the generator asks of them: a field's shape
//! through typedefs, the fewest bytes a value takes, and the chunk-list shapes of RFC 8166
//! section 4.1 (found by structure, so both versions' names are recognised).

use std::collections::{HashMap, HashSet};

use crate::ir::{Item, ItemKind, Model, Payload, Prim, Repr};

/// Every item of the parts, once.
#[derive(Debug)]
pub(crate) struct Types<'a> {
    /// In definition order, part by part.
    pub(crate) items: Vec<&'a Item>,
    by_name: HashMap<&'a str, &'a Item>,
}

/// What a value's shape comes to once typedefs are looked through.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Resolved<'a> {
    /// A scalar.
    Prim(Prim),
    /// An enum, by name.
    Enum(&'a str),
    /// A struct or union, dissected by its own function.
    Call(&'a str),
    /// An opaque, string, array, optional or list.
    Shape(&'a Repr),
}

/// Whether two definitions of one name in different parts are the same (`uint32` is defined
/// by `rpcrdma-v1.x` and by `common.x`).
fn same(a: &Item, b: &Item) -> bool {
    match (&a.kind, &b.kind) {
        (ItemKind::Typedef { repr: x, .. }, ItemKind::Typedef { repr: y, .. }) => x == y,
        (ItemKind::Const { value: x, .. }, ItemKind::Const { value: y, .. }) => x == y,
        _ => false,
    }
}

impl<'a> Types<'a> {
    /// The items of `models`; a name defined twice must be defined the same way.
    pub(crate) fn merge(models: &[&'a Model]) -> Result<Types<'a>, String> {
        let mut items = Vec::new();
        let mut by_name: HashMap<&'a str, &'a Item> = HashMap::new();
        for model in models {
            for item in &model.items {
                match by_name.get(item.xdr_name.as_str()) {
                    Some(prev) if same(prev, item) => {}
                    Some(prev) => {
                        return Err(format!(
                            "`{}` is defined differently at {} and at {}; a dissector needs one \
                             meaning per name",
                            item.xdr_name, prev.origin, item.origin
                        ))
                    }
                    None => {
                        by_name.insert(&item.xdr_name, item);
                        items.push(item);
                    }
                }
            }
        }
        Ok(Types { items, by_name })
    }

    /// The item named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a Item> {
        self.by_name.get(name).copied()
    }

    /// The integer constants, in definition order.
    pub(crate) fn consts(&self) -> impl Iterator<Item = (&'a str, i128)> + '_ {
        self.items.iter().filter_map(|i| match i.kind {
            ItemKind::Const { value, .. } => Some((i.xdr_name.as_str(), value)),
            _ => None,
        })
    }

    /// `repr` with typedefs looked through.
    pub(crate) fn resolve(&self, repr: &'a Repr) -> Resolved<'a> {
        match repr {
            Repr::Prim(p) => Resolved::Prim(*p),
            Repr::Boxed(inner) => self.resolve(inner),
            Repr::Named(n) => match self.get(n).map(|i| &i.kind) {
                Some(ItemKind::Typedef { repr, .. }) => self.resolve(repr),
                Some(ItemKind::Enum { .. }) => Resolved::Enum(n),
                // Structs and unions; the checker leaves no other kind of name in a type.
                _ => Resolved::Call(n),
            },
            other => Resolved::Shape(other),
        }
    }

    /// The fewest bytes a value of `repr` takes on the wire.
    pub(crate) fn min_len(&self, repr: &Repr) -> usize {
        match repr {
            Repr::Prim(Prim::Hyper | Prim::UHyper | Prim::Double) => 8,
            Repr::Prim(_) => 4,
            Repr::Named(n) => self.get(n).map_or(4, |i| i.props.min_len),
            Repr::FixedOpaque(n) => {
                let n = n.value as usize;
                n + (4 - n % 4) % 4
            }
            Repr::VarOpaque(_) | Repr::Str(_) | Repr::VarArray(..) | Repr::Optional(_) => 4,
            Repr::List(_) => 4,
            Repr::FixedArray(e, n) => self.min_len(e).saturating_mul(n.value as usize),
            Repr::Boxed(e) => self.min_len(e),
            Repr::NonEmptyList(l) => self.get(l).map_or(4, |i| i.props.min_len) + 4,
        }
    }

    /// The fields of the struct `name`, and whether it is a linked-list element.
    fn struct_fields(&self, name: &str) -> Option<(&'a [crate::ir::Field], bool)> {
        match &self.get(name)?.kind {
            ItemKind::Struct { fields, list_next } => Some((fields, list_next.is_some())),
            _ => None,
        }
    }

    fn is_uint(&self, repr: &'a Repr) -> bool {
        matches!(self.resolve(repr), Resolved::Prim(Prim::UInt))
    }

    /// A segment: `uint32 handle; uint32 length; uint64 offset;` (RFC 8166 section 4.1.1).
    pub(crate) fn is_segment(&self, name: &str) -> bool {
        match self.struct_fields(name) {
            Some((f, false)) if f.len() == 3 => {
                self.is_uint(&f[0].repr)
                    && self.is_uint(&f[1].repr)
                    && matches!(self.resolve(&f[2].repr), Resolved::Prim(Prim::UHyper))
            }
            _ => false,
        }
    }

    /// A read segment: `uint32 position;` and a segment.
    fn is_read_segment(&self, name: &str) -> bool {
        match self.struct_fields(name) {
            Some((f, false)) if f.len() == 2 => {
                self.is_uint(&f[0].repr)
                    && matches!(self.resolve(&f[1].repr), Resolved::Call(s) if self.is_segment(s))
            }
            _ => false,
        }
    }

    /// The element of a Read list: a linked list of read segments.
    pub(crate) fn is_read_list(&self, name: &str) -> bool {
        match self.struct_fields(name) {
            Some((f, true)) if f.len() == 1 => {
                matches!(self.resolve(&f[0].repr), Resolved::Call(s) if self.is_read_segment(s))
            }
            _ => false,
        }
    }

    /// A Write chunk: a counted array of segments.
    pub(crate) fn is_write_chunk(&self, name: &str) -> bool {
        match self.struct_fields(name) {
            Some((f, false)) if f.len() == 1 => match self.resolve(&f[0].repr) {
                Resolved::Shape(Repr::VarArray(e, _)) => {
                    matches!(self.resolve(e), Resolved::Call(s) if self.is_segment(s))
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// The element of a Write list: a linked list of Write chunks.
    pub(crate) fn is_write_list(&self, name: &str) -> bool {
        match self.struct_fields(name) {
            Some((f, true)) if f.len() == 1 => {
                matches!(self.resolve(&f[0].repr), Resolved::Call(s) if self.is_write_chunk(s))
            }
            _ => false,
        }
    }

    /// The names of the types some other type uses (a type using itself, a recursive one,
    /// does not count).
    pub(crate) fn used_by_others(&self) -> HashSet<&'a str> {
        let mut out = HashSet::new();
        for item in &self.items {
            let mut uses = HashSet::new();
            Self::uses(item, &mut uses);
            uses.remove(item.xdr_name.as_str());
            out.extend(uses);
        }
        out
    }

    /// The type names `item` refers to.
    fn uses(item: &'a Item, out: &mut HashSet<&'a str>) {
        fn walk<'b>(repr: &'b Repr, out: &mut HashSet<&'b str>) {
            match repr {
                Repr::Named(n) | Repr::List(n) | Repr::NonEmptyList(n) => {
                    out.insert(n);
                }
                Repr::FixedArray(e, _)
                | Repr::VarArray(e, _)
                | Repr::Optional(e)
                | Repr::Boxed(e) => walk(e, out),
                _ => {}
            }
        }
        match &item.kind {
            ItemKind::Struct { fields, .. } => {
                for f in fields {
                    walk(&f.repr, out);
                }
            }
            ItemKind::Union(u) => {
                if let crate::ir::Disc::Enum(e) = &u.disc {
                    out.insert(e);
                }
                for arm in u.arms.iter().chain(&u.default) {
                    match &arm.payload {
                        Payload::Void => {}
                        Payload::One(f) => walk(&f.repr, out),
                        Payload::Many(fs) => {
                            for f in fs {
                                walk(&f.repr, out);
                            }
                        }
                    }
                }
            }
            ItemKind::Typedef { repr, .. } => walk(repr, out),
            _ => {}
        }
    }
}
