//! Snapshots of the generated code, so a change to what users' crates compile is reviewed.
//! Bless with `INSTA_UPDATE=always` (or `cargo insta review`) and read the diff.

use syn::parse_quote;

fn expand(input: syn::DeriveInput) -> String {
    let tokens = crate::expand_xdr(&input).unwrap_or_else(syn::Error::into_compile_error);
    prettyplease::unparse(&syn::parse2(tokens).expect("the derive output parses as a file"))
}

#[test]
fn struct_expansion() {
    insta::assert_snapshot!(expand(parse_quote! {
        struct File {
            #[xdr(max = MAXNAMELEN)]
            filename: XdrString,
            #[xdr(fixed = 8)]
            verifier: Bytes,
            #[xdr(list)]
            entries: Vec<Entry>,
            parent: Option<Box<File>>,
        }
    }));
}

#[test]
fn enum_expansion() {
    insta::assert_snapshot!(expand(parse_quote! {
        enum FileKind {
            Text = 0,
            Data = 1,
            Exec = LAST,
        }
    }));
}

#[test]
fn union_expansion() {
    insta::assert_snapshot!(expand(parse_quote! {
        #[xdr(switch = u32)]
        enum Reply {
            #[xdr(case = 0)]
            Ok { value: u64 },
            #[xdr(case = 1, case = 2)]
            Retry(#[xdr(discriminant)] u32),
            #[xdr(default)]
            Other(#[xdr(discriminant)] u32, #[xdr(max = 16)] Bytes),
        }
    }));
}

#[test]
fn errors_are_collected_not_first_only() {
    let input: syn::DeriveInput = parse_quote! {
        struct Bad {
            #[xdr(max = 1)]
            a: u32,
            b: String,
            #[xdr(nope)]
            c: u32,
        }
    };
    let err = crate::expand_xdr(&input).unwrap_err();
    assert_eq!(err.into_iter().count(), 3);
}
