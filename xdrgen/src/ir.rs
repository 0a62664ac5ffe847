//! The checked model: every name resolved, every size evaluated, recursion and linked lists
//! decided. Code generation reads only this.

use crate::ast::{Annotation, Loc};

/// A checked specification (all input files, one namespace).
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Items in definition order (hoisted anonymous types come right before their parent).
    pub items: Vec<Item>,
    /// Type names used and defined nowhere (the first use of each) that were reported as
    /// errors; lenient mode's readings (warnings) are not listed.
    pub unresolved: Vec<Unresolved>,
}

/// A type name used and defined nowhere, reported as an error.
#[derive(Debug, Clone)]
pub struct Unresolved {
    /// The name, at its first use.
    pub name: crate::ast::Ident,
    /// Whether lenient mode would read it as something (`uint32`, a type named
    /// differently): an error only in strict mode.
    pub lenient_reads_it: bool,
}

impl Model {
    /// The item named `xdr_name`, if any.
    pub fn get(&self, xdr_name: &str) -> Option<&Item> {
        self.items.iter().find(|i| i.xdr_name == xdr_name)
    }
}

/// One generated item.
#[derive(Debug, Clone)]
pub struct Item {
    /// The name in the XDR source.
    pub xdr_name: String,
    /// Where it is defined.
    pub loc: Loc,
    /// `file:line`, for the doc comment.
    pub origin: String,
    /// What it is.
    pub kind: ItemKind,
    /// Derivable traits and wire facts.
    pub props: Props,
}

/// Derivable traits and the minimum encoded length of a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Props {
    /// `Copy` can be derived.
    pub copy: bool,
    /// `Eq` and `Hash` can be derived.
    pub eq: bool,
    /// The fewest bytes a value occupies on the wire.
    pub min_len: usize,
    /// The type is part of a recursive cycle: decoding counts nesting depth.
    pub recursive: bool,
}

/// The kinds of item.
#[derive(Debug, Clone)]
pub enum ItemKind {
    /// `const NAME = VALUE;`
    Const {
        /// The value.
        value: i128,
        /// The Rust type chosen.
        ty: Prim,
        /// Why that type (for the doc comment).
        why: String,
    },
    /// `const NAME = "text";` (rpcgen extension).
    StrConst {
        /// The text.
        text: String,
    },
    /// An enum.
    Enum {
        /// Members with distinct values.
        members: Vec<EnumMember>,
        /// Members whose value repeats an earlier one (lenient mode): (name, canonical member).
        aliases: Vec<(String, String)>,
    },
    /// A struct.
    Struct {
        /// The fields (without the `next` field of a linked list).
        fields: Vec<Field>,
        /// For a linked-list element: the name of the dropped `next` field.
        list_next: Option<String>,
    },
    /// A discriminated union.
    Union(Union),
    /// A typedef.
    Typedef {
        /// The aliased shape.
        repr: Repr,
        /// Whether a newtype is needed (the shape's encoding differs from its Rust type's).
        newtype: bool,
    },
    /// A program definition (RFC 5531 section 12).
    Program(Program),
}

/// An enum member.
#[derive(Debug, Clone)]
pub struct EnumMember {
    /// XDR name.
    pub name: String,
    /// Value.
    pub value: i32,
    /// Where.
    pub loc: Loc,
}

/// A struct field, or the declaration of a union arm.
#[derive(Debug, Clone)]
pub struct Field {
    /// XDR name.
    pub name: String,
    /// Shape.
    pub repr: Repr,
    /// Annotations written before it (`/* @ddp */`).
    pub annotations: Vec<Annotation>,
    /// Where.
    pub loc: Loc,
}

/// A size: its value and the constant it was written as, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    /// The value.
    pub value: u32,
    /// The constant's XDR name when the size was written as a name.
    pub name: Option<String>,
}

/// Built-in scalar types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prim {
    /// `int`.
    Int,
    /// `unsigned int`.
    UInt,
    /// `hyper`.
    Hyper,
    /// `unsigned hyper`.
    UHyper,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `bool`.
    Bool,
}

/// The longest fixed-length array generated as a Rust array `[T; N]`.
pub const MAX_INLINE_ARRAY: u32 = 64;

/// The shape of a value, deciding its Rust type and its encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repr {
    /// A scalar.
    Prim(Prim),
    /// A generated type, by XDR name.
    Named(String),
    /// `opaque x[N]`.
    FixedOpaque(Size),
    /// `opaque x<N>`.
    VarOpaque(Option<Size>),
    /// `string x<N>`.
    Str(Option<Size>),
    /// `T x[N]`: `[T; N]` up to [`MAX_INLINE_ARRAY`] elements, a length-checked `Vec<T>` above
    /// (a large array would not fit on the stack).
    FixedArray(Box<Repr>, Size),
    /// `T x<N>`.
    VarArray(Box<Repr>, Option<Size>),
    /// `T *x`.
    Optional(Box<Repr>),
    /// A box around a recursive type.
    Boxed(Box<Repr>),
    /// `L *x` where `L` is a linked-list element: `Vec<L>`.
    List(String),
    /// `L x` where `L` is a linked-list element: a non-empty `Vec<L>`.
    NonEmptyList(String),
}

impl Repr {
    /// Whether the Rust type's own `Encode`/`Decode` produce this shape's wire form.
    pub fn is_natural(&self) -> bool {
        match self {
            Repr::Prim(_) | Repr::Named(_) => true,
            Repr::VarOpaque(None) | Repr::Str(None) => true,
            Repr::FixedOpaque(_) | Repr::VarOpaque(Some(_)) | Repr::Str(Some(_)) => false,
            Repr::FixedArray(e, n) => n.value <= MAX_INLINE_ARRAY && e.is_natural(),
            Repr::VarArray(e, max) => max.is_none() && e.is_natural(),
            Repr::Optional(e) | Repr::Boxed(e) => e.is_natural(),
            Repr::List(_) | Repr::NonEmptyList(_) => false,
        }
    }
}

/// A union's discriminant type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disc {
    /// `int`.
    Int,
    /// `unsigned int`.
    UInt,
    /// `bool`.
    Bool,
    /// An enum, by XDR name.
    Enum(String),
}

/// A case label.
#[derive(Debug, Clone)]
pub struct Label {
    /// The name written (enum member or constant), if a name.
    pub name: Option<String>,
    /// Its value.
    pub value: i64,
}

/// What an arm holds.
#[derive(Debug, Clone)]
pub enum Payload {
    /// `void`.
    Void,
    /// One declaration.
    One(Field),
    /// Several declarations (the drafts' dialect, lenient mode).
    Many(Vec<Field>),
}

/// A union arm.
#[derive(Debug, Clone)]
pub struct UnionArm {
    /// Case labels (empty for `default`).
    pub labels: Vec<Label>,
    /// Payload.
    pub payload: Payload,
    /// Where.
    pub loc: Loc,
}

/// A discriminated union.
#[derive(Debug, Clone)]
pub struct Union {
    /// Discriminant type.
    pub disc: Disc,
    /// Discriminant name.
    pub disc_name: Option<String>,
    /// The `case` arms.
    pub arms: Vec<UnionArm>,
    /// The `default` arm.
    pub default: Option<UnionArm>,
}

/// A program.
#[derive(Debug, Clone)]
pub struct Program {
    /// Program number.
    pub number: u32,
    /// Where the number is written (its text says whether it was hexadecimal).
    pub number_loc: Loc,
    /// Versions.
    pub versions: Vec<ProgramVersion>,
}

/// A version of a program.
#[derive(Debug, Clone)]
pub struct ProgramVersion {
    /// XDR name.
    pub name: String,
    /// Number.
    pub number: u32,
    /// Procedures.
    pub procedures: Vec<ProgramProcedure>,
    /// Where.
    pub loc: Loc,
    /// `file:line`.
    pub origin: String,
}

/// A procedure.
#[derive(Debug, Clone)]
pub struct ProgramProcedure {
    /// XDR name.
    pub name: String,
    /// Number.
    pub number: u32,
    /// Argument shapes (empty: `void`).
    pub args: Vec<Repr>,
    /// Result shape (`None`: `void`).
    pub result: Option<Repr>,
    /// `file:line`.
    pub origin: String,
}
