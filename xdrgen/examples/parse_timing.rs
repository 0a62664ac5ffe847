//! Times the front end on some `.x` files: preprocessing, lexing, the parser alone (on
//! tokens lexed once) and the whole of `parse_file`.
//!
//! `cargo run --release -p rpcrdma-xdrgen --example parse_timing -- specs/nfs3.x /usr/include/rpcsvc/nis.x`

use std::time::{Duration, Instant};

use rpcrdma_xdrgen::ast::FileId;
use rpcrdma_xdrgen::diag::Diagnostics;
use rpcrdma_xdrgen::parse::{lexer, parse_file, preproc};

/// The best of `rounds` averages of `iters` runs of `f`.
fn best(rounds: usize, iters: usize, mut f: impl FnMut()) -> Duration {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters as u32
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).expect("readable file");
        let pre = preproc::preprocess(FileId(0), &text);
        let toks = lexer::lex(&pre.text).tokens;
        let (rounds, iters) = (15, 200);
        let t_pre = best(rounds, iters, || {
            std::hint::black_box(preproc::preprocess(FileId(0), &text));
        });
        let t_lex = best(rounds, iters, || {
            std::hint::black_box(lexer::lex(&pre.text));
        });
        let t_all = best(rounds, iters, || {
            let mut d = Diagnostics::default();
            std::hint::black_box(parse_file(FileId(0), &text, false, &mut d));
        });
        let t_parse = best(rounds, iters, || {
            let mut d = Diagnostics::default();
            std::hint::black_box(rpcrdma_xdrgen::parse::parser::parse(
                &toks,
                FileId(0),
                false,
                &mut d,
            ));
        });
        println!(
            "{path}: {} tokens; preprocess {t_pre:?}, lex {t_lex:?}, parser {t_parse:?}, parse_file {t_all:?}",
            toks.len()
        );
    }
}
