//! No input makes the compiler panic: random token soup and mutations of real `.x` files go
//! through the whole pipeline (parse, check, render diagnostics, generate). When checking
//! reports no error, the generated code must be valid Rust syntax.

use proptest::prelude::*;
use rpcrdma_xdrgen::Config;

const VOCAB: &[&str] = &[
    "const",
    "typedef",
    "enum",
    "struct",
    "union",
    "switch",
    "case",
    "default",
    "void",
    "program",
    "version",
    "opaque",
    "string",
    "int",
    "unsigned",
    "hyper",
    "float",
    "double",
    "quadruple",
    "bool",
    "TRUE",
    "FALSE",
    "uint32",
    "x",
    "y",
    "T",
    "self",
    "type",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    ";",
    ":",
    ",",
    "=",
    "*",
    "-",
    "0",
    "1",
    "0x10",
    "017",
    "4294967296",
    "99999999999999999999",
    "\"s\"",
    "/* c */",
    "/* @ddp */",
    "//@ddp\n",
    "\n%pass\n",
    "\n#ifdef X\n",
    "\n#else\n",
    "\n#endif\n",
    "/*",
    "\"",
];

fn seeds() -> Vec<String> {
    let mut v = vec![
        include_str!("drafts/000-rpcrdma-00-s4.2.x").to_string(),
        include_str!("drafts/000-rpcrdma-00-s6.2.x").to_string(),
        include_str!("drafts/003-common.x").to_string(),
        include_str!("drafts/003-baseops.x").to_string(),
        include_str!("drafts/004-rfc5666bis-01-s5.6.x").to_string(),
    ];
    for f in ["mount.x", "nfs_prot.x", "yp.x", "rex.x", "key_prot.x"] {
        if let Ok(t) = std::fs::read_to_string(format!("/usr/include/rpcsvc/{f}")) {
            v.push(t);
        }
    }
    v
}

fn run(src: &str) {
    for lenient in [false, true] {
        let comp = Config::new()
            .lenient(lenient)
            .check_sources(&[("f.x", src)]);
        let _ = comp.render();
        if !comp.has_errors() {
            let code = comp.generate().expect("no errors, so generation succeeds");
            let body = code.split_once("\n\n").map_or("", |(_, b)| b);
            if let Err(e) = syn::parse_file(body) {
                panic!("generated code does not parse: {e}\n--- input\n{src}\n--- output\n{code}");
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Duplicate(usize, usize),
    Insert(usize, usize),
    Byte(usize, u8),
}

fn apply(src: &str, muts: &[Mutation]) -> String {
    let mut b = src.as_bytes().to_vec();
    for m in muts {
        let n = b.len().max(1);
        match *m {
            Mutation::Delete(at, len) => {
                let at = at % n;
                let end = (at + len % 64).min(b.len());
                b.drain(at.min(b.len())..end);
            }
            Mutation::Duplicate(at, len) => {
                let at = (at % n).min(b.len());
                let end = (at + len % 128).min(b.len());
                let piece = b[at..end].to_vec();
                b.splice(at..at, piece);
            }
            Mutation::Insert(at, tok) => {
                let at = (at % n).min(b.len());
                let t = format!(" {} ", VOCAB[tok % VOCAB.len()]);
                b.splice(at..at, t.into_bytes());
            }
            Mutation::Byte(at, v) => {
                if !b.is_empty() {
                    let at = at % b.len();
                    b[at] = v;
                }
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, l)| Mutation::Delete(a, l)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, l)| Mutation::Duplicate(a, l)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, t)| Mutation::Insert(a, t)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, v)| Mutation::Byte(a, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn token_soup_never_panics(toks in prop::collection::vec(0..VOCAB.len(), 0..80)) {
        let src: Vec<&str> = toks.iter().map(|&i| VOCAB[i]).collect();
        run(&src.join(" "));
    }

    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,200}") {
        run(&src);
    }

    #[test]
    fn mutated_real_files_never_panic(
        which in any::<usize>(),
        muts in prop::collection::vec(mutation(), 1..6),
    ) {
        let seeds = seeds();
        let src = apply(&seeds[which % seeds.len()], &muts);
        run(&src);
    }
}

#[test]
fn deep_nesting_and_long_constant_chains_are_errors_not_crashes() {
    let deep = format!(
        "typedef {} int x; {} t;",
        "struct { ".repeat(10_000),
        "} y; ".repeat(10_000)
    );
    let comp = Config::new().check_sources(&[("deep.x", &deep)]);
    assert!(comp.render().contains("nested deeper than 32"));
    let mut chain = String::from("const C0 = 1;\n");
    for i in 1..5_000 {
        chain.push_str(&format!("const C{i} = C{};\n", i - 1));
    }
    chain.push_str("typedef opaque o<C4999>;\n");
    let comp = Config::new().check_sources(&[("chain.x", &chain)]);
    assert!(comp.render().contains("more than 256 other constants"));
}
