//! Trait bounds for generic containers.

use proc_macro2::TokenStream;
use syn::parse_quote;

/// `generics` with `T: <bound>` added for every type parameter, as serde does: a generic
/// struct encodes when its parameters do.
pub fn with_bound(generics: &syn::Generics, bound: &TokenStream) -> syn::Generics {
    let mut generics = generics.clone();
    let params: Vec<syn::Ident> = generics.type_params().map(|p| p.ident.clone()).collect();
    let where_clause = generics.make_where_clause();
    for ident in params {
        where_clause.predicates.push(parse_quote!(#ident: #bound));
    }
    generics
}
