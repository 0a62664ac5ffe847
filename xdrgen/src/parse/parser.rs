//! Recursive-descent parser over the token stream, with error recovery.
//!
//! Grammar: RFC 4506 section 6.3 (`specification`, `definition`, `declaration`,
//! `type-specifier`, ...) and RFC 5531 section 12.2 (`program-def`), plus the rpcgen habit of
//! writing `struct X` / `enum X` / `union X` as a type specifier. The old RPC-over-RDMA drafts'
//! dialect (typed constants, missing `=` or `{`, several declarations per union arm, unnamed
//! discriminants) is recognised and reported as a quirk: an error in strict mode, a warning in
//! lenient mode, parsed the same way in both so checking can go on.

use super::lexer::{Tok, Token};
use crate::ast::*;
use crate::diag::{Diagnostic, Diagnostics};

/// Parser state for one file.
pub struct Parser<'a> {
    toks: &'a [Token],
    pos: usize,
    file: FileId,
    lenient: bool,
    diags: &'a mut Diagnostics,
    pending: Vec<Annotation>,
    /// Nesting of inline `struct {..}`/`union switch ..`/`enum {..}` type specifiers.
    depth: usize,
}

/// The deepest nesting of inline type definitions accepted (bounds the parser's recursion).
pub const MAX_NESTING: usize = 64;

/// A parse failure whose diagnostic has already been recorded.
#[derive(Debug)]
pub struct Failed;

type PResult<T> = Result<T, Failed>;

const DEF_KEYWORDS: &[&str] = &["const", "typedef", "enum", "struct", "union", "program"];

impl<'a> Parser<'a> {
    /// A parser over `toks` (which must end with [`Tok::Eof`]).
    pub fn new(toks: &'a [Token], file: FileId, lenient: bool, diags: &'a mut Diagnostics) -> Self {
        Parser {
            toks,
            pos: 0,
            file,
            lenient,
            diags,
            pending: Vec::new(),
            depth: 0,
        }
    }

    // ---- token access -------------------------------------------------------------------

    fn skip_annotations(&mut self) {
        while let Some(Token {
            tok: Tok::Annotation(name),
            span,
        }) = self.toks.get(self.pos)
        {
            self.pending.push(Annotation {
                name: name.clone(),
                loc: Loc {
                    file: self.file,
                    span: span.clone(),
                },
            });
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> &Tok {
        self.skip_annotations();
        self.toks.get(self.pos).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        self.toks
            .iter()
            .skip(self.pos)
            .filter(|t| !matches!(t.tok, Tok::Annotation(_)))
            .nth(n)
            .map(|t| &t.tok)
            .unwrap_or(&Tok::Eof)
    }

    fn loc(&mut self) -> Loc {
        self.skip_annotations();
        let span = self
            .toks
            .get(self.pos)
            .or_else(|| self.toks.last())
            .map(|t| t.span.clone())
            .unwrap_or(0..0);
        Loc {
            file: self.file,
            span,
        }
    }

    /// The location just after the previous token (where a missing token belongs).
    fn after_prev(&self) -> Loc {
        let end = self
            .pos
            .checked_sub(1)
            .and_then(|p| self.toks.get(p))
            .map_or(0, |t| t.span.end);
        Loc {
            file: self.file,
            span: end..end,
        }
    }

    fn prev_loc(&self) -> Loc {
        let span = self
            .pos
            .checked_sub(1)
            .and_then(|p| self.toks.get(p))
            .map_or(0..0, |t| t.span.clone());
        Loc {
            file: self.file,
            span,
        }
    }

    fn bump(&mut self) -> Token {
        self.skip_annotations();
        let t = self.toks.get(self.pos).cloned().unwrap_or(Token {
            tok: Tok::Eof,
            span: 0..0,
        });
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn is_punct(&mut self, c: char) -> bool {
        *self.peek() == Tok::Punct(c)
    }

    fn is_word(&mut self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == w)
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn describe(tok: &Tok) -> String {
        match tok {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Number(n) => format!("`{n}`"),
            Tok::Punct(c) => format!("`{c}`"),
            Tok::Annotation(a) => format!("annotation `@{a}`"),
            Tok::Str(_) => "a string literal".into(),
            Tok::Eof => "end of file".into(),
        }
    }

    fn unexpected(&mut self, expected: &str) -> Failed {
        let found = Self::describe(&self.peek().clone());
        let loc = self.loc();
        self.diags.push(
            Diagnostic::error(format!("expected {expected}, found {found}"))
                .at(&loc, format!("expected {expected}")),
        );
        Failed
    }

    fn expect_punct(&mut self, c: char, context: &str) -> PResult<()> {
        if self.eat_punct(c) {
            return Ok(());
        }
        let found = Self::describe(&self.peek().clone());
        let at = self.after_prev();
        let here = self.loc();
        self.diags.push(
            Diagnostic::error(format!("expected `{c}` {context}, found {found}"))
                .at(&at, format!("expected `{c}` here"))
                .also(&here, "unexpected token")
                .help(format!("insert `{c}`")),
        );
        Err(Failed)
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(name) if is_reserved(&name) => {
                let loc = self.loc();
                let mut d = Diagnostic::error(format!("expected {what}, found keyword `{name}`"))
                    .at(&loc, "a keyword cannot be a name")
                    .note("RFC 4506 section 6.4 lists the reserved words");
                // `unsinged int x;`: the word before was probably a misspelled keyword.
                if let Some(Token {
                    tok: Tok::Ident(prev),
                    span,
                }) = self.pos.checked_sub(1).and_then(|p| self.toks.get(p))
                {
                    let words = ["unsigned", "struct", "enum", "union", "opaque", "string"];
                    if let Some(k) = crate::diag::did_you_mean(prev, words.into_iter()) {
                        let prev_loc = Loc {
                            file: self.file,
                            span: span.clone(),
                        };
                        d = d
                            .also(&prev_loc, "read as a type name")
                            .help(format!("did you mean `{k}`?"));
                    }
                }
                self.diags.push(d);
                Err(Failed)
            }
            Tok::Ident(name) => {
                let loc = self.loc();
                self.bump();
                Ok(Ident { name, loc })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    // ---- recovery -----------------------------------------------------------------------

    /// Skips to just after the next `;` at brace depth 0, or to the next definition keyword
    /// at the start of a line of tokens following a `}`.
    fn recover_top(&mut self) {
        let mut depth = 0i32;
        loop {
            match self.peek().clone() {
                Tok::Eof => return,
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => depth -= 1,
                Tok::Punct(';') if depth <= 0 => {
                    self.bump();
                    return;
                }
                Tok::Ident(w)
                    if depth <= 0 && DEF_KEYWORDS.contains(&w.as_str())
                    // Only a keyword that starts a definition (not `struct X` used as a type).
                    && self.pos > 0 && self.looks_like_definition_start() =>
                {
                    return;
                }
                _ => {}
            }
            self.bump();
        }
    }

    fn looks_like_definition_start(&self) -> bool {
        matches!(
            self.toks.get(self.pos.wrapping_sub(1)).map(|t| &t.tok),
            Some(Tok::Punct(';')) | Some(Tok::Punct('}')) | None
        )
    }

    /// Skips to after the next `;` inside a body, or to its closing `}` (not consumed).
    fn recover_in_body(&mut self) {
        let mut depth = 0i32;
        loop {
            match self.peek().clone() {
                Tok::Eof => return,
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                }
                Tok::Punct(';') if depth == 0 => {
                    self.bump();
                    return;
                }
                _ => {}
            }
            self.bump();
        }
    }

    // ---- definitions --------------------------------------------------------------------

    /// Parses a whole file.
    pub fn specification(&mut self) -> Specification {
        let mut spec = Specification::default();
        loop {
            let at_end = *self.peek() == Tok::Eof;
            for a in std::mem::take(&mut self.pending) {
                self.diags.push(
                    Diagnostic::warning(format!(
                        "annotation `@{}` is not before a declaration in a struct or union arm",
                        a.name
                    ))
                    .at(&a.loc, "ignored")
                    .help("place it on the line before the field it marks"),
                );
            }
            if at_end {
                break;
            }
            let start = self.loc();
            match self.definition() {
                Ok(def) => {
                    let loc = start.to(&self.prev_loc());
                    spec.definitions.push((def, loc));
                }
                Err(Failed) => self.recover_top(),
            }
        }
        spec
    }

    fn definition(&mut self) -> PResult<Definition> {
        let word = match self.peek().clone() {
            Tok::Ident(w) => w,
            _ => {
                return Err(self.unexpected(
                    "a definition (`const`, `typedef`, `enum`, `struct`, `union` or `program`)",
                ))
            }
        };
        if !DEF_KEYWORDS.contains(&word.as_str()) {
            let failed = self.unexpected(
                "a definition (`const`, `typedef`, `enum`, `struct`, `union` or `program`)",
            );
            if let Some(k) = crate::diag::did_you_mean(&word, DEF_KEYWORDS.iter().copied()) {
                if let Some(last) = self.diags.items.last_mut() {
                    last.help.push(format!("did you mean `{k}`?"));
                }
            }
            return Err(failed);
        }
        let def = match word.as_str() {
            "const" => self.constant()?,
            "typedef" => {
                self.bump();
                let d = self.declaration()?;
                Definition::Typedef(d)
            }
            "enum" => {
                self.bump();
                let name = self.ident("the enum's name")?;
                let body = self.enum_body()?;
                Definition::Enum(name, body)
            }
            "struct" => {
                self.bump();
                let name = self.ident("the struct's name")?;
                let body = self.struct_body(Some(&name))?;
                Definition::Struct(name, body)
            }
            "union" => {
                self.bump();
                let name = self.ident("the union's name")?;
                let body = self.union_body()?;
                Definition::Union(name, body)
            }
            "program" => Definition::Program(self.program()?),
            _ => {
                return Err(self.unexpected(
                    "a definition (`const`, `typedef`, `enum`, `struct`, `union` or `program`)",
                ))
            }
        };
        if matches!(self.peek(), Tok::Ident(w) if DEF_KEYWORDS.contains(&w.as_str())) {
            // A forgotten `;` before the next definition: report it, keep both definitions.
            let at = self.after_prev();
            self.diags.push(
                Diagnostic::error("expected `;` after the definition")
                    .at(&at, "expected `;` here")
                    .help("insert `;`"),
            );
            return Ok(def);
        }
        self.expect_punct(';', "after the definition")?;
        Ok(def)
    }

    fn constant(&mut self) -> PResult<Definition> {
        self.bump(); // const
                     // `const NAME = V;`, or the drafts' typed `const TYPE NAME = V;`.
        let typed = matches!(self.peek_at(1), Tok::Ident(_))
            || matches!(self.peek(), Tok::Ident(w) if w == "unsigned");
        let ty = if typed {
            let ty = self.type_spec()?;
            Some(ty)
        } else {
            None
        };
        let name = self.ident("the constant's name")?;
        if let Some(ty) = &ty {
            let span = ty.loc.to(&name.loc);
            self.diags.push(
                Diagnostic::quirk(
                    self.lenient,
                    format!("typed constant `{}`: XDR constants have no type", name.name),
                )
                .at(&span, "a type is not allowed here")
                .help(format!(
                    "remove the type: `const {} = ...;` (RFC 4506 section 6.3 `constant-def`)",
                    name.name
                ))
                .note(
                    "lenient mode accepts typed constants and uses the type for the Rust constant",
                ),
            );
        }
        if !self.eat_punct('=') {
            let starts_value = matches!(
                self.peek(),
                Tok::Number(_) | Tok::Punct('-') | Tok::Ident(_)
            );
            if !starts_value {
                self.expect_punct('=', "after the constant's name")?;
            }
            let at = self.after_prev();
            self.diags.push(
                Diagnostic::quirk(
                    self.lenient,
                    format!("missing `=` in the definition of constant `{}`", name.name),
                )
                .at(&at, "expected `=` here")
                .help(format!("insert `=`: `const {} = ...;`", name.name)),
            );
        }
        let value = if let Tok::Str(text) = self.peek().clone() {
            let loc = self.loc();
            self.bump();
            Value::Str { text, loc }
        } else {
            self.value("the constant's value")?
        };
        Ok(Definition::Const { name, ty, value })
    }

    fn value(&mut self, what: &str) -> PResult<Value> {
        match self.peek().clone() {
            Tok::Number(n) => {
                let loc = self.loc();
                self.bump();
                Ok(Value::Lit { value: n, loc })
            }
            Tok::Punct('-') => {
                let start = self.loc();
                self.bump();
                match self.peek().clone() {
                    Tok::Number(n) => {
                        let end = self.loc();
                        self.bump();
                        Ok(Value::Lit {
                            value: -n,
                            loc: start.to(&end),
                        })
                    }
                    _ => Err(self.unexpected("a number after `-`")),
                }
            }
            Tok::Ident(name) if !is_reserved(&name) => {
                let loc = self.loc();
                self.bump();
                Ok(Value::Name(Ident { name, loc }))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn enum_body(&mut self) -> PResult<EnumBody> {
        self.expect_punct('{', "to open the enum body")?;
        let mut members = Vec::new();
        loop {
            let name = self.ident("an enum member name")?;
            // rpcgen accepts members without a value, numbered like C enumerators.
            let value = if self.eat_punct('=') {
                Some(self.value("the enum member's value")?)
            } else {
                None
            };
            members.push(EnumMember { name, value });
            if self.eat_punct(',') {
                // RFC 4506 has no trailing comma, but it is harmless.
                if self.is_punct('}') {
                    break;
                }
                continue;
            }
            break;
        }
        self.expect_punct('}', "to close the enum body")?;
        Ok(EnumBody { members })
    }

    fn struct_body(&mut self, name: Option<&Ident>) -> PResult<StructBody> {
        if !self.eat_punct('{') {
            // The v2 draft's `struct rpcrdma2_hdr_prefix` (no `{`, section 6.3).
            let starts_decl =
                matches!(self.peek(), Tok::Ident(w) if !DEF_KEYWORDS[..2].contains(&w.as_str()));
            match name {
                Some(n) if starts_decl => {
                    let at = self.after_prev();
                    self.diags.push(
                        Diagnostic::quirk(
                            self.lenient,
                            format!("missing `{{` after `struct {}`", n.name),
                        )
                        .at(&at, "expected `{` here")
                        .also(&n.loc, "in this struct")
                        .help(format!("insert `{{`: `struct {} {{`", n.name)),
                    );
                }
                _ => return Err(self.unexpected("`{` to open the struct body")),
            }
        }
        let mut fields = Vec::new();
        while !self.is_punct('}') {
            if *self.peek() == Tok::Eof {
                return Err(self.unexpected("`}` to close the struct body"));
            }
            match self.declaration() {
                Ok(d) => {
                    if self.expect_punct(';', "after the field").is_err() {
                        self.recover_in_body();
                    }
                    fields.push(d);
                }
                Err(Failed) => self.recover_in_body(),
            }
        }
        self.bump();
        if fields.is_empty() {
            let loc = self.prev_loc();
            self.diags.push(
                Diagnostic::error("a struct needs at least one field")
                    .at(&loc, "empty struct body")
                    .note("RFC 4506 section 6.3: struct-body has one or more declarations"),
            );
        }
        Ok(StructBody { fields })
    }

    fn union_body(&mut self) -> PResult<UnionBody> {
        if !self.is_word("switch") {
            return Err(self.unexpected("`switch`"));
        }
        self.bump();
        self.expect_punct('(', "after `switch`")?;
        let disc_type = self.type_spec()?;
        let disc_name = if self.is_punct(')') {
            let at = self.after_prev();
            self.diags.push(
                Diagnostic::quirk(self.lenient, "the union's discriminant has no name")
                    .at(&at, "expected a name here")
                    .also(&disc_type.loc, "discriminant type")
                    .help("name the discriminant, e.g. `switch (type_name disc)`"),
            );
            None
        } else {
            Some(self.ident("the discriminant's name")?)
        };
        self.expect_punct(')', "after the discriminant")?;
        self.expect_punct('{', "to open the union body")?;
        let mut arms = Vec::new();
        let mut default = None;
        loop {
            if self.is_word("case") {
                let start = self.loc();
                let mut labels = Vec::new();
                while self.is_word("case") {
                    self.bump();
                    labels.push(self.value("a case value")?);
                    self.expect_punct(':', "after the case value")?;
                }
                let decls = self.arm_decls()?;
                let loc = start.to(&self.prev_loc());
                arms.push(Arm { labels, decls, loc });
            } else if self.is_word("default") {
                let start = self.loc();
                self.bump();
                self.expect_punct(':', "after `default`")?;
                let decls = self.arm_decls()?;
                let loc = start.to(&self.prev_loc());
                if default.is_some() {
                    self.diags.push(
                        Diagnostic::error("a union has at most one `default` arm")
                            .at(&loc, "second `default`"),
                    );
                }
                default = Some(Arm {
                    labels: Vec::new(),
                    decls,
                    loc,
                });
            } else if self.is_punct('}') {
                break;
            } else {
                return Err(self.unexpected("`case`, `default` or `}`"));
            }
        }
        self.bump();
        if arms.is_empty() {
            let loc = self.prev_loc();
            self.diags.push(
                Diagnostic::error("a union needs at least one `case` arm")
                    .at(&loc, "no `case` arm")
                    .note("RFC 4506 section 6.3: union-body has one or more case-specs"),
            );
        }
        Ok(UnionBody {
            disc_type,
            disc_name,
            arms,
            default,
        })
    }

    /// The declarations of one arm: `void;`, one declaration, or (a quirk) several.
    fn arm_decls(&mut self) -> PResult<Vec<Decl>> {
        if self.is_word("void") {
            self.bump();
            self.expect_punct(';', "after `void`")?;
            return Ok(Vec::new());
        }
        let mut decls = Vec::new();
        loop {
            let d = self.declaration()?;
            self.expect_punct(';', "after the arm's declaration")?;
            decls.push(d);
            if self.is_word("case") || self.is_word("default") || self.is_punct('}') {
                break;
            }
            if *self.peek() == Tok::Eof {
                return Err(self.unexpected("`}` to close the union body"));
            }
        }
        if decls.len() > 1 {
            let loc = decls[1].loc.to(&decls[decls.len() - 1].loc);
            let names: Vec<&str> = decls.iter().map(|d| d.name.name.as_str()).collect();
            self.diags.push(
                Diagnostic::quirk(
                    self.lenient,
                    format!(
                        "union arm has {} declarations; XDR allows one per arm",
                        decls.len()
                    ),
                )
                .at(&loc, "extra declarations")
                .also(&decls[0].loc, "first declaration")
                .help(format!(
                    "define a struct holding `{}` and declare one field of that type in the arm",
                    names.join("`, `")
                ))
                .note("lenient mode treats the declarations as an anonymous struct"),
            );
        }
        Ok(decls)
    }

    fn declaration(&mut self) -> PResult<Decl> {
        self.skip_annotations();
        let annotations = std::mem::take(&mut self.pending);
        let start = self.loc();
        if self.is_word("opaque") || self.is_word("string") {
            let is_string = self.is_word("string");
            self.bump();
            let name = self.ident("a name")?;
            let kind = if self.eat_punct('[') {
                let v = self.value("a length")?;
                self.expect_punct(']', "after the length")?;
                if is_string {
                    self.diags.push(
                        Diagnostic::error("a string cannot have a fixed length")
                            .at(&start.to(&self.prev_loc()), "fixed-length string")
                            .help(format!(
                                "use `string {}<N>` (RFC 4506 section 4.11)",
                                name.name
                            )),
                    );
                }
                DeclKind::FixedOpaque(v)
            } else if self.eat_punct('<') {
                let max = if self.is_punct('>') {
                    None
                } else {
                    Some(self.value("a maximum length")?)
                };
                self.expect_punct('>', "after the maximum length")?;
                if is_string {
                    DeclKind::String(max)
                } else {
                    DeclKind::VarOpaque(max)
                }
            } else {
                let what = if is_string { "string" } else { "opaque" };
                let loc = self.after_prev();
                self.diags.push(
                    Diagnostic::error(format!("`{what}` needs a length"))
                        .at(&loc, "expected `[N]` or `<N>` here")
                        .help(format!(
                            "write `{what} {}<>` for data of any length",
                            name.name
                        )),
                );
                return Err(Failed);
            };
            let loc = start.to(&self.prev_loc());
            return Ok(Decl {
                name,
                kind,
                annotations,
                loc,
            });
        }
        let ty = self.type_spec()?;
        let kind_and_name = if self.eat_punct('*') {
            let name = self.ident("a name after `*`")?;
            (DeclKind::Optional(ty), name)
        } else {
            let name = self.ident("a name")?;
            if self.eat_punct('[') {
                let v = self.value("an array length")?;
                self.expect_punct(']', "after the array length")?;
                (DeclKind::FixedArray(ty, v), name)
            } else if self.eat_punct('<') {
                let max = if self.is_punct('>') {
                    None
                } else {
                    Some(self.value("a maximum length")?)
                };
                self.expect_punct('>', "after the maximum length")?;
                (DeclKind::VarArray(ty, max), name)
            } else {
                (DeclKind::Plain(ty), name)
            }
        };
        let (kind, name) = kind_and_name;
        let loc = start.to(&self.prev_loc());
        Ok(Decl {
            name,
            kind,
            annotations,
            loc,
        })
    }

    /// A type specifier (RFC 4506 section 6.3), plus rpcgen's C spellings.
    fn type_spec(&mut self) -> PResult<Type> {
        let start = self.loc();
        let word = match self.peek().clone() {
            Tok::Ident(w) => w,
            _ => return Err(self.unexpected("a type")),
        };
        self.bump();
        let kind = match word.as_str() {
            "unsigned" => match self.peek().clone() {
                Tok::Ident(w) if w == "int" || w == "long" || w == "short" || w == "char" => {
                    self.bump();
                    TypeKind::UInt
                }
                Tok::Ident(w) if w == "hyper" => {
                    self.bump();
                    TypeKind::UHyper
                }
                _ => TypeKind::UInt,
            },
            "int" => TypeKind::Int,
            "hyper" => TypeKind::Hyper,
            "float" => TypeKind::Float,
            "double" => TypeKind::Double,
            "quadruple" => TypeKind::Quadruple,
            "bool" => TypeKind::Bool,
            "struct" | "enum" | "union" => {
                if self.is_punct('{') || (word == "union" && self.is_word("switch")) {
                    if self.depth >= MAX_NESTING {
                        self.diags.push(
                            Diagnostic::error(format!(
                                "inline type definitions nested deeper than {MAX_NESTING}"
                            ))
                            .at(&start, "too deep")
                            .help("define the inner types separately and refer to them by name"),
                        );
                        return Err(Failed);
                    }
                    self.depth += 1;
                    let kind = match word.as_str() {
                        "struct" => self.struct_body(None).map(TypeKind::Struct),
                        "enum" => self.enum_body().map(TypeKind::Enum),
                        _ => self.union_body().map(|b| TypeKind::Union(Box::new(b))),
                    };
                    self.depth -= 1;
                    kind?
                } else {
                    TypeKind::Named(self.ident(&format!("a {word} name"))?)
                }
            }
            w if is_reserved(w) => {
                self.pos -= 1;
                return Err(self.unexpected("a type"));
            }
            _ => TypeKind::Named(Ident {
                name: word,
                loc: start.clone(),
            }),
        };
        let loc = start.to(&self.prev_loc());
        Ok(Type { kind, loc })
    }

    fn program(&mut self) -> PResult<Program> {
        self.bump(); // program
        let name = self.ident("the program's name")?;
        self.expect_punct('{', "to open the program body")?;
        let mut versions = Vec::new();
        while !self.is_punct('}') {
            if !self.is_word("version") {
                return Err(self.unexpected("`version` or `}`"));
            }
            self.bump();
            let vname = self.ident("the version's name")?;
            self.expect_punct('{', "to open the version body")?;
            let mut procedures = Vec::new();
            while !self.is_punct('}') {
                if *self.peek() == Tok::Eof {
                    return Err(self.unexpected("`}` to close the version body"));
                }
                procedures.push(self.procedure()?);
            }
            self.bump();
            self.expect_punct('=', "after the version body")?;
            let number = self.value("the version number")?;
            self.expect_punct(';', "after the version number")?;
            versions.push(Version {
                name: vname,
                procedures,
                number,
            });
        }
        self.bump();
        self.expect_punct('=', "after the program body")?;
        let number = self.value("the program number")?;
        Ok(Program {
            name,
            versions,
            number,
        })
    }

    fn type_or_void(&mut self) -> PResult<Option<Type>> {
        if self.is_word("void") {
            self.bump();
            Ok(None)
        } else {
            self.type_spec().map(Some)
        }
    }

    fn procedure(&mut self) -> PResult<Procedure> {
        let result = self.type_or_void()?;
        let name = self.ident("the procedure's name")?;
        self.expect_punct('(', "after the procedure's name")?;
        let mut args = Vec::new();
        if let Some(t) = self.type_or_void()? {
            args.push(t);
            while self.eat_punct(',') {
                args.push(self.type_spec()?);
            }
        }
        self.expect_punct(')', "after the arguments")?;
        self.expect_punct('=', "after the procedure's signature")?;
        let number = self.value("the procedure number")?;
        self.expect_punct(';', "after the procedure number")?;
        Ok(Procedure {
            name,
            result,
            args,
            number,
        })
    }
}

/// Keywords of RFC 4506 section 6.4 and RFC 5531 that cannot be names.
pub fn is_reserved(w: &str) -> bool {
    matches!(
        w,
        "bool"
            | "case"
            | "const"
            | "default"
            | "double"
            | "quadruple"
            | "enum"
            | "float"
            | "hyper"
            | "int"
            | "opaque"
            | "string"
            | "struct"
            | "switch"
            | "typedef"
            | "union"
            | "unsigned"
            | "void"
            | "program"
            | "version"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::lexer::lex;

    fn parse(src: &str, lenient: bool) -> (Specification, Diagnostics) {
        let (toks, errs) = lex(src);
        assert!(errs.is_empty(), "{errs:?}");
        let mut diags = Diagnostics::default();
        let spec = Parser::new(&toks, FileId(0), lenient, &mut diags).specification();
        (spec, diags)
    }

    fn one(src: &str) -> Definition {
        let (spec, diags) = parse(src, false);
        assert!(!diags.has_errors(), "{diags:?}");
        assert_eq!(spec.definitions.len(), 1);
        spec.definitions[0].0.clone()
    }

    #[test]
    fn constants() {
        let Definition::Const { value, ty, .. } = one("const X = -0x10;") else {
            panic!()
        };
        assert!(ty.is_none());
        assert!(matches!(value, Value::Lit { value: -16, .. }));
    }

    #[test]
    fn declarations() {
        let Definition::Struct(_, body) =
            one("struct s { opaque a[4]; opaque b<>; string c<10>; int d[2]; int e<>; int *f; struct t g; };")
        else {
            panic!()
        };
        let kinds: Vec<&DeclKind> = body.fields.iter().map(|f| &f.kind).collect();
        assert!(matches!(kinds[0], DeclKind::FixedOpaque(_)));
        assert!(matches!(kinds[1], DeclKind::VarOpaque(None)));
        assert!(matches!(kinds[2], DeclKind::String(Some(_))));
        assert!(matches!(kinds[3], DeclKind::FixedArray(..)));
        assert!(matches!(kinds[4], DeclKind::VarArray(_, None)));
        assert!(matches!(kinds[5], DeclKind::Optional(_)));
        assert!(
            matches!(kinds[6], DeclKind::Plain(Type { kind: TypeKind::Named(n), .. }) if n.name == "t")
        );
    }

    #[test]
    fn unions_with_shared_arms_and_default() {
        let Definition::Union(_, u) =
            one("union u switch (int d) { case 1: case 2: int a; case 3: void; default: void; };")
        else {
            panic!()
        };
        assert_eq!(u.arms.len(), 2);
        assert_eq!(u.arms[0].labels.len(), 2);
        assert!(u.arms[1].decls.is_empty());
        assert!(u.default.is_some());
    }

    #[test]
    fn programs() {
        let Definition::Program(p) =
            one("program P { version V { void NUL(void) = 0; int ADD(int, int) = 1; } = 2; } = 0x20000000;")
        else {
            panic!()
        };
        assert_eq!(p.versions[0].procedures.len(), 2);
        assert_eq!(p.versions[0].procedures[1].args.len(), 2);
        assert!(p.versions[0].procedures[0].result.is_none());
    }

    #[test]
    fn quirks_are_errors_unless_lenient() {
        let src =
            "const uint32 X 1; struct s int a; }; union u switch (int) { case 1: int a; int b; };";
        let (strict, d) = parse(src, false);
        assert_eq!(d.error_count(), 5, "{d:?}");
        let (lenient, d) = parse(src, true);
        assert!(!d.has_errors(), "{d:?}");
        // Both modes repair the same way, so checking can go on.
        assert_eq!(strict, lenient);
        assert_eq!(lenient.definitions.len(), 3);
    }

    #[test]
    fn recovers_after_errors() {
        let (spec, d) = parse(
            "struct a { int ; }; struct b { int x; }; garbage here; enum e { A = 1 };",
            false,
        );
        assert!(d.error_count() >= 2);
        let names: Vec<String> = spec
            .definitions
            .iter()
            .filter_map(|(def, _)| match def {
                Definition::Struct(n, _) | Definition::Enum(n, _) => Some(n.name.clone()),
                _ => None,
            })
            .collect();
        assert!(
            names.contains(&"b".to_string()) && names.contains(&"e".to_string()),
            "{names:?}"
        );
    }
}
