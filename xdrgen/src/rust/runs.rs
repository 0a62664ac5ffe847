//! Runs of consecutive fixed-size numeric struct fields, encoded and decoded as one block:
//! one capacity check and one copy for the run instead of one per field (rpcgen's
//! `XDR_INLINE` does the same). Fields whose type is itself a struct of such numbers are
//! flattened into the run, so a chunk segment of RPC-over-RDMA (`handle`, `length`,
//! `offset`) inside a read segment (`position`, segment) is one 20-byte block.

use proc_macro2::{Ident, TokenStream};
use quote::quote;

use super::ident::field_name;
use super::{lit_usize, Gen};
use crate::ir::*;

/// The largest struct flattened into a block; larger ones are coded field by field, so
/// that generated code never puts big arrays on the stack.
const MAX_BLOCK: usize = 256;

/// Consecutive struct fields: one on its own, or a run of at least two numbers.
pub(super) enum FieldGroup {
    /// A field coded on its own, by index.
    Single(usize),
    /// Fields coded as one block: (index, layout).
    Run(Vec<(usize, Flat)>),
}

/// The wire layout of a value that can sit in a block.
pub(super) enum Flat {
    /// A 4- or 8-byte number of Rust type `ty`.
    Number { width: usize, ty: TokenStream },
    /// A struct (Rust type `ty`) whose fields, in order, all sit in the block.
    Struct {
        ty: TokenStream,
        fields: Vec<(Ident, Flat)>,
    },
}

impl Flat {
    /// Bytes on the wire.
    fn width(&self) -> usize {
        match self {
            Flat::Number { width, .. } => *width,
            Flat::Struct { fields, .. } => fields.iter().map(|(_, f)| f.width()).sum(),
        }
    }

    /// Numbers in it.
    fn numbers(&self) -> usize {
        match self {
            Flat::Number { .. } => 1,
            Flat::Struct { fields, .. } => fields.iter().map(|(_, f)| f.numbers()).sum(),
        }
    }
}

impl Gen<'_> {
    /// The block layout of shape `r`, if it has one: numbers (also through typedef
    /// aliases) of 4 or 8 bytes, and structs made only of those. `bool` and enums stay out
    /// (their decoding checks the value), as do recursive and linked-list structs and
    /// DDP-eligible fields.
    fn flat(&self, r: &Repr) -> Option<Flat> {
        let number = |width| {
            Some(Flat::Number {
                width,
                ty: self.rust_type(r),
            })
        };
        match r {
            Repr::Prim(Prim::Int | Prim::UInt | Prim::Float) => number(4),
            Repr::Prim(Prim::Hyper | Prim::UHyper | Prim::Double) => number(8),
            Repr::Named(n) => {
                let item = self.model.get(n)?;
                match &item.kind {
                    ItemKind::Typedef {
                        repr,
                        newtype: false,
                    } => match self.flat(repr)? {
                        Flat::Number { width, .. } => number(width),
                        s @ Flat::Struct { .. } => Some(s),
                    },
                    ItemKind::Struct {
                        fields,
                        list_next: None,
                    } if !item.props.recursive => {
                        let fields = fields
                            .iter()
                            .map(|f| {
                                let flat = self.flat(&f.repr).filter(|_| !Self::is_ddp(f))?;
                                Some((field_name(&f.name), flat))
                            })
                            .collect::<Option<Vec<_>>>()?;
                        let s = Flat::Struct {
                            ty: self.rust_type(r),
                            fields,
                        };
                        (s.width() <= MAX_BLOCK).then_some(s)
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Groups `fields` (in order) into runs and single fields. DDP-eligible fields are
    /// always single.
    pub(super) fn field_groups(&self, fields: &[Field]) -> Vec<FieldGroup> {
        let mut groups = Vec::new();
        let mut run: Vec<(usize, Flat)> = Vec::new();
        let close = |run: &mut Vec<(usize, Flat)>, groups: &mut Vec<FieldGroup>| {
            let numbers: usize = run.iter().map(|(_, f)| f.numbers()).sum();
            match numbers {
                0 => {}
                1 => groups.push(FieldGroup::Single(run[0].0)),
                _ => groups.push(FieldGroup::Run(std::mem::take(run))),
            }
            run.clear();
        };
        for (i, f) in fields.iter().enumerate() {
            match self.flat(&f.repr).filter(|_| !Self::is_ddp(f)) {
                Some(flat)
                    if run.iter().map(|(_, f)| f.width()).sum::<usize>() + flat.width()
                        <= MAX_BLOCK =>
                {
                    run.push((i, flat))
                }
                Some(flat) => {
                    close(&mut run, &mut groups);
                    run.push((i, flat));
                }
                None => {
                    close(&mut run, &mut groups);
                    groups.push(FieldGroup::Single(i));
                }
            }
        }
        close(&mut run, &mut groups);
        groups
    }

    /// The value expressions of a struct's run (`self.field`) with their layouts.
    pub(super) fn run_fields<'r>(
        names: &[Ident],
        run: &'r [(usize, Flat)],
    ) -> Vec<(TokenStream, &'r Flat)> {
        run.iter()
            .map(|(i, flat)| {
                let n = &names[*i];
                (quote!(self.#n), flat)
            })
            .collect()
    }

    /// Statements encoding a run: each value expression with its layout, in order. With
    /// `present`, the block starts with a TRUE present flag (RFC 4506 section 4.19).
    pub(super) fn encode_run(&self, present: bool, values: &[(TokenStream, &Flat)]) -> TokenStream {
        let rt = &self.rt;
        let lead = if present { 4 } else { 0 };
        let total: usize = lead + values.iter().map(|(_, f)| f.width()).sum::<usize>();
        let n = lit_usize(total);
        let mut at = lead;
        let mut writes = Vec::new();
        if present {
            writes.push(quote!(block.put::<0>(1u32);));
        }
        for (v, flat) in values {
            Self::write_flat(v.clone(), flat, &mut at, &mut writes);
        }
        quote! {
            {
                let mut block = #rt::Block::<#n>::new();
                #(#writes)*
                enc.put_block(&block);
            }
        }
    }

    /// Statements writing `value` (laid out as `flat`) at byte `at` of `block`.
    fn write_flat(value: TokenStream, flat: &Flat, at: &mut usize, out: &mut Vec<TokenStream>) {
        match flat {
            Flat::Number { width, .. } => {
                let a = lit_usize(*at);
                *at += width;
                out.push(quote!(block.put::<#a>(#value);));
            }
            Flat::Struct { fields, .. } => {
                for (name, f) in fields {
                    Self::write_flat(quote!(#value.#name), f, at, out);
                }
            }
        }
    }

    /// For a run of fields laid out as `flats`: the statement reading the block into
    /// `block`, and one expression per field building its value from the block.
    pub(super) fn decode_run(
        &self,
        block: &Ident,
        flats: &[&Flat],
    ) -> (TokenStream, Vec<TokenStream>) {
        let (n, exprs) = self.run_values(block, flats);
        (quote!(let #block = dec.get_block::<#n>()?;), exprs)
    }

    /// The size of a run laid out as `flats`, and one expression per field building its
    /// value from the run's bytes in `block`.
    pub(super) fn run_values(
        &self,
        block: &Ident,
        flats: &[&Flat],
    ) -> (proc_macro2::Literal, Vec<TokenStream>) {
        let total: usize = flats.iter().map(|f| f.width()).sum();
        let n = lit_usize(total);
        let mut at = 0;
        let exprs = flats
            .iter()
            .map(|f| Self::read_flat(block, f, &mut at))
            .collect();
        (n, exprs)
    }

    /// An expression reading a value laid out as `flat` at byte `at` of `block`.
    fn read_flat(block: &Ident, flat: &Flat, at: &mut usize) -> TokenStream {
        match flat {
            Flat::Number { width, ty } => {
                let a = lit_usize(*at);
                *at += width;
                quote!(#block.get::<#a, #ty>())
            }
            Flat::Struct { ty, fields } => {
                let inits = fields.iter().map(|(name, f)| {
                    let e = Self::read_flat(block, f, at);
                    quote!(#name: #e,)
                });
                quote!(#ty { #(#inits)* })
            }
        }
    }

    /// For a struct coded as a single run: `encode_present` and `decode_present`
    /// (with its in-place form) that read or write the present flag and the fields as one
    /// block, for optional data and linked-list elements. Empty for other structs, which keep
    /// the trait's defaults.
    pub(super) fn struct_present_block(
        &self,
        fields: &[Field],
        names: &[Ident],
        groups: &[FieldGroup],
    ) -> (TokenStream, TokenStream) {
        let rt = &self.rt;
        let run = match groups {
            [FieldGroup::Run(run)] if run.len() == fields.len() => run,
            _ => return (TokenStream::new(), TokenStream::new()),
        };
        let write = self.encode_run(true, &Self::run_fields(names, run));
        // Always inlined: otherwise the `Result<Option<Self>>` goes back through memory on
        // every list element (about 8% of the instructions of an RPC-over-RDMA header).
        let encode = quote! {
            #[inline(always)]
            fn encode_present(&self, enc: &mut #rt::Encoder) -> #rt::Result<()> {
                #write
                ::core::result::Result::Ok(())
            }
        };
        let block = quote::format_ident!("block");
        let flats: Vec<_> = run.iter().map(|(_, flat)| flat).collect();
        let (n, exprs) = self.run_values(&block, &flats);
        let inits = run.iter().zip(exprs).map(|((i, _), e)| {
            let name = &names[*i];
            quote!(#name: #e,)
        });
        let decode = quote! {
            #[inline(always)]
            fn decode_present(dec: &mut #rt::Decoder) -> #rt::Result<::core::option::Option<Self>> {
                let ::core::option::Option::Some(block) = dec.get_present_block::<#n>()? else {
                    return ::core::result::Result::Ok(::core::option::Option::None);
                };
                ::core::result::Result::Ok(::core::option::Option::Some(Self { #(#inits)* }))
            }

            #[inline(always)]
            fn decode_present_in_place(&mut self, dec: &mut #rt::Decoder) -> #rt::Result<bool> {
                match Self::decode_present(dec)? {
                    ::core::option::Option::Some(v) => {
                        *self = v;
                        ::core::result::Result::Ok(true)
                    }
                    ::core::option::Option::None => ::core::result::Result::Ok(false),
                }
            }
        };
        (encode, decode)
    }
}
