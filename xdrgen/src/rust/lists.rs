//! Linked lists (`struct L { ...; L *next; }`): the element type's name as it reads in a
//! list, and the documentation of the element and of the fields holding lists.
//!
//! When the XDR name of the element says `list` (`rpcrdma1_read_list`), the struct is still
//! named after it (`Rpcrdma1ReadList`), and an alias with `Item` appended
//! (`Rpcrdma1ReadListItem`) names one element: fields holding such a list are
//! `Vec<Rpcrdma1ReadListItem>`, which reads as a list of items rather than a list of lists.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::ident::{type_name, type_name_str};
use super::{doc, Gen};
use crate::ir::*;

impl Gen<'_> {
    /// The alias naming one element of the linked list `xdr_name`, when its name ends in
    /// `list` and the alias does not collide with another generated type.
    pub(super) fn list_item_alias(&self, xdr_name: &str) -> Option<Ident> {
        let item = self.model.get(xdr_name)?;
        let ItemKind::Struct {
            list_next: Some(_), ..
        } = &item.kind
        else {
            return None;
        };
        let rust = type_name_str(xdr_name);
        if !rust.ends_with("List") {
            return None;
        }
        let alias = format!("{rust}Item");
        let taken = self
            .model
            .items
            .iter()
            .any(|i| type_name_str(&i.xdr_name) == alias);
        (!taken).then(|| format_ident!("{}", alias))
    }

    /// The Rust name of one element of the linked list `xdr_name` (the alias when there is
    /// one).
    pub(super) fn list_element_name(&self, xdr_name: &str) -> Ident {
        self.list_item_alias(xdr_name)
            .unwrap_or_else(|| type_name(xdr_name))
    }

    /// The doc paragraph of a linked-list element struct.
    pub(super) fn list_element_doc(&self, xdr_name: &str, next: &str) -> String {
        let element = self.list_element_name(xdr_name);
        let alias = match self.list_item_alias(xdr_name) {
            Some(a) => format!(" (also named `{a}`)"),
            None => String::new(),
        };
        format!(
            "\n\nOne element of a linked list{alias}: the `{next}` field is not stored here. A \
             list of them is a `Vec<{element}>`: `{xdr_name} *` (zero or more) encodes with \
             `encode_list`, a bare `{xdr_name}` (one or more) with `encode_nonempty_list`, each \
             element after a `true` word and the list ended by `false`. This type's own \
             `Encode`/`Decode` cover one element's other fields."
        )
    }

    /// The alias item after a linked-list element struct, if its name calls for one.
    pub(super) fn list_alias_item(&self, item: &Item) -> TokenStream {
        let Some(alias) = self.list_item_alias(&item.xdr_name) else {
            return TokenStream::new();
        };
        let name = type_name(&item.xdr_name);
        let d = doc(&format!(
            "One element of the linked list `{}`: fields holding the list are \
             `Vec<{alias}>`.",
            item.xdr_name
        ));
        quote!(#d pub type #alias = #name;)
    }

    /// The doc paragraph for a field or arm holding a linked list, empty otherwise.
    pub(super) fn list_field_doc(&self, r: &Repr) -> String {
        match r {
            Repr::List(n) => format!(
                "\n\nA linked list (`{n} *`): zero or more `{}` elements.",
                self.list_element_name(n)
            ),
            Repr::NonEmptyList(n) => format!(
                "\n\nA linked list (`{n}`): one or more `{}` elements; an empty `Vec` does \
                 not encode.",
                self.list_element_name(n)
            ),
            _ => String::new(),
        }
    }
}
