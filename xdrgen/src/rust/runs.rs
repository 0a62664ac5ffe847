//! Runs of consecutive fixed-size numeric struct fields, encoded and decoded as one block:
//! one capacity check and one copy for the run instead of one per field (rpcgen's
//! `XDR_INLINE` does the same). The chunk segments of RPC-over-RDMA headers
//! (`handle`, `length`, `offset`) are such runs.

use proc_macro2::TokenStream;
use quote::quote;

use super::{lit_usize, Gen};
use crate::ir::*;

/// Consecutive struct fields: one on its own, or a run of at least two numeric ones.
pub(super) enum FieldGroup {
    /// A field coded on its own, by index.
    Single(usize),
    /// Fields coded as one block: (index, wire width in bytes).
    Run(Vec<(usize, usize)>),
}

impl Gen<'_> {
    /// The wire width of a field that can join a run: numbers (also through typedef aliases)
    /// of 4 or 8 bytes. `bool` and enums stay out: their decoding checks the value.
    fn run_width(&self, r: &Repr) -> Option<usize> {
        match r {
            Repr::Prim(Prim::Int | Prim::UInt | Prim::Float) => Some(4),
            Repr::Prim(Prim::Hyper | Prim::UHyper | Prim::Double) => Some(8),
            Repr::Named(n) => match self.model.get(n).map(|i| &i.kind) {
                Some(ItemKind::Typedef {
                    repr,
                    newtype: false,
                }) => self.run_width(repr),
                _ => None,
            },
            _ => None,
        }
    }

    /// Groups `fields` (in order) into runs and single fields. DDP-eligible fields are
    /// always single.
    pub(super) fn field_groups(&self, fields: &[Field]) -> Vec<FieldGroup> {
        let mut groups = Vec::new();
        let mut run: Vec<(usize, usize)> = Vec::new();
        let close = |run: &mut Vec<(usize, usize)>, groups: &mut Vec<FieldGroup>| {
            match run.len() {
                0 => {}
                1 => groups.push(FieldGroup::Single(run[0].0)),
                _ => groups.push(FieldGroup::Run(std::mem::take(run))),
            }
            run.clear();
        };
        for (i, f) in fields.iter().enumerate() {
            match self.run_width(&f.repr).filter(|_| !Self::is_ddp(f)) {
                Some(w) => run.push((i, w)),
                None => {
                    close(&mut run, &mut groups);
                    groups.push(FieldGroup::Single(i));
                }
            }
        }
        close(&mut run, &mut groups);
        groups
    }

    /// Statements encoding a run whose field values are `values` (expressions of numeric
    /// type, in order, with their widths).
    pub(super) fn encode_run(&self, values: &[(TokenStream, usize)]) -> TokenStream {
        let rt = &self.rt;
        let total: usize = values.iter().map(|(_, w)| w).sum();
        let n = lit_usize(total);
        let mut at = 0;
        let writes = values.iter().map(|(v, w)| {
            let a = lit_usize(at);
            at += w;
            quote!(#rt::BlockNumber::write_at::<#a, #n>(#v, &mut block);)
        });
        quote! {
            {
                let mut block = [0u8; #n];
                #(#writes)*
                enc.put_array(block);
            }
        }
    }

    /// For a run of `fields` (with their widths): the statement reading the block into
    /// `block`, and one expression per field reading it from the block.
    pub(super) fn decode_run(
        &self,
        block: &proc_macro2::Ident,
        fields: &[(&Field, usize)],
    ) -> (TokenStream, Vec<TokenStream>) {
        let rt = &self.rt;
        let total: usize = fields.iter().map(|(_, w)| w).sum();
        let n = lit_usize(total);
        let read = quote!(let #block: [u8; #n] = dec.get_array()?;);
        let mut at = 0;
        let exprs = fields
            .iter()
            .map(|(f, w)| {
                let t = self.rust_type(&f.repr);
                let a = lit_usize(at);
                at += w;
                quote!(<#t as #rt::BlockNumber>::read_at::<#a, #n>(&#block))
            })
            .collect();
        (read, exprs)
    }
}
