//! The parsed form of an XDR specification (RFC 4506 section 6, RFC 5531 section 12).
//!
//! Every node keeps its location (file and byte range) so later phases can point at it.

use std::ops::Range;

/// Index of a source file in [`crate::diag::Sources`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub usize);

/// A location: file and byte range.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Loc {
    /// The file.
    pub file: FileId,
    /// Byte offsets into that file's text.
    pub span: Range<usize>,
}

impl Loc {
    /// A location spanning from the start of `self` to the end of `other` (same file).
    pub fn to(&self, other: &Loc) -> Loc {
        Loc {
            file: self.file,
            span: self.span.start..other.span.end.max(self.span.start),
        }
    }
}

/// A name with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// The name as written.
    pub name: String,
    /// Where.
    pub loc: Loc,
}

/// A constant or a reference to one (RFC 4506 section 6.3 `value`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A literal (decimal, hex, octal, possibly negative).
    Lit {
        /// The value.
        value: i128,
        /// Where.
        loc: Loc,
    },
    /// A named constant or enum member.
    Name(Ident),
    /// `NAME + delta`: only from `%#define` pass-through lines (`LM_MAXSTRLEN+1`).
    Offset {
        /// The named constant.
        base: Ident,
        /// What is added to it.
        delta: i128,
        /// Where.
        loc: Loc,
    },
    /// A string literal (rpcgen extension, only in `const` definitions).
    Str {
        /// The text between the quotes.
        text: String,
        /// Where.
        loc: Loc,
    },
}

impl Value {
    /// Where the value is written.
    pub fn loc(&self) -> &Loc {
        match self {
            Value::Lit { loc, .. } | Value::Str { loc, .. } | Value::Offset { loc, .. } => loc,
            Value::Name(i) => &i.loc,
        }
    }
}

/// A type specifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Type {
    /// Which type.
    pub kind: TypeKind,
    /// Where.
    pub loc: Loc,
    /// The keyword a named type was written with (rpcgen's `struct X`), if any: evidence of
    /// the kind of definition the name needs.
    pub tag: Option<Tag>,
}

/// The keyword before a type name in rpcgen's `struct X` / `union X` / `enum X`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tag {
    /// `struct X`.
    Struct,
    /// `union X`.
    Union,
    /// `enum X`.
    Enum,
}

/// The kinds of type specifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeKind {
    /// `int` (also rpcgen's `long`, `short`, `char`).
    Int,
    /// `unsigned int` or bare `unsigned` (also `u_int`, `u_long`, ...).
    UInt,
    /// `hyper`.
    Hyper,
    /// `unsigned hyper`.
    UHyper,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `quadruple` (parsed, rejected by the checker).
    Quadruple,
    /// `bool`.
    Bool,
    /// A named type, possibly written `struct X` / `enum X` / `union X` (rpcgen style).
    Named(Ident),
    /// An inline `enum { ... }`.
    Enum(EnumBody),
    /// An inline `struct { ... }`.
    Struct(StructBody),
    /// An inline `union switch (...) { ... }`.
    Union(Box<UnionBody>),
}

/// An annotation comment (`/* @ddp */`, `//@ddp`) placed before a declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// The word after `@`, e.g. `ddp`.
    pub name: String,
    /// Where the comment is.
    pub loc: Loc,
}

/// The shape of a declaration (RFC 4506 section 6.3 `declaration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclKind {
    /// `T x`.
    Plain(Type),
    /// `T x[N]`.
    FixedArray(Type, Value),
    /// `T x<N>` / `T x<>`.
    VarArray(Type, Option<Value>),
    /// `opaque x[N]`.
    FixedOpaque(Value),
    /// `opaque x<N>` / `opaque x<>`.
    VarOpaque(Option<Value>),
    /// `string x<N>` / `string x<>`.
    String(Option<Value>),
    /// `T *x`.
    Optional(Type),
}

/// A declaration: a field, a typedef or a union arm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decl {
    /// The declared name.
    pub name: Ident,
    /// Its shape.
    pub kind: DeclKind,
    /// Annotations written immediately before it (`/* @ddp */`).
    pub annotations: Vec<Annotation>,
    /// The whole declaration.
    pub loc: Loc,
}

/// One `NAME = VALUE` of an enum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumMember {
    /// The member's name.
    pub name: Ident,
    /// Its value (`None`: rpcgen's implicit value, one more than the previous member's).
    pub value: Option<Value>,
}

/// `{ A = 1, B = 2 }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumBody {
    /// The members in order.
    pub members: Vec<EnumMember>,
}

/// `{ T a; U b; }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructBody {
    /// The fields in order.
    pub fields: Vec<Decl>,
}

/// `case A: case B: T x;`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arm {
    /// The case labels.
    pub labels: Vec<Value>,
    /// The declarations: empty for `void`, one in standard XDR, several in the old drafts'
    /// dialect (accepted in lenient mode as an anonymous struct).
    pub decls: Vec<Decl>,
    /// The whole arm.
    pub loc: Loc,
}

/// `switch (T d) { arms... default: ...; }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnionBody {
    /// The discriminant's type.
    pub disc_type: Type,
    /// The discriminant's name (missing in the old drafts' dialect).
    pub disc_name: Option<Ident>,
    /// The `case` arms.
    pub arms: Vec<Arm>,
    /// The `default:` arm (`decls` empty for `void`).
    pub default: Option<Arm>,
}

/// A procedure of a program version (RFC 5531 section 12.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Procedure {
    /// Procedure name.
    pub name: Ident,
    /// Result type, `None` for `void`.
    pub result: Option<Type>,
    /// Argument types, empty for `void`.
    pub args: Vec<Type>,
    /// Procedure number.
    pub number: Value,
}

/// A version of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Version name.
    pub name: Ident,
    /// Its procedures.
    pub procedures: Vec<Procedure>,
    /// Version number.
    pub number: Value,
}

/// A `program` definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Program name.
    pub name: Ident,
    /// Its versions.
    pub versions: Vec<Version>,
    /// Program number.
    pub number: Value,
}

/// A top-level definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Definition {
    /// `typedef declaration;`
    Typedef(Decl),
    /// `enum NAME { ... };`
    Enum(Ident, EnumBody),
    /// `struct NAME { ... };`
    Struct(Ident, StructBody),
    /// `union NAME switch (...) { ... };`
    Union(Ident, UnionBody),
    /// `const NAME = VALUE;` (`ty` is set for the drafts' typed constants, `const uint32 X = 1;`).
    Const {
        /// The constant's name.
        name: Ident,
        /// The type written in a typed constant (a quirk).
        ty: Option<Type>,
        /// Its value.
        value: Value,
    },
    /// `program NAME { ... } = N;`
    Program(Program),
}

/// A parsed file: its definitions in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Specification {
    /// The definitions.
    pub definitions: Vec<(Definition, Loc)>,
}
