//! The xdrgen front end on arbitrary text: preprocess, lex, parse, check, render the
//! diagnostics and, when checking finds no error, generate Rust. Nothing may panic; a clean
//! check must generate.
//!
//! Input: one options byte (bit 0 lenient, bit 1 services, bit 2 the `@ddp` mark, bit 3 render
//! the diagnostics), then the
//! `.x` text (invalid UTF-8 is replaced, as a file read lossily would be).
//!
//! Allocation bound: 1024 x input + 4 MiB. Generation expands: one short definition becomes a
//! type, its codec impls and, for a program, a client, a server trait and a dispatcher (the
//! largest single allocation is the output text, several hundred times its input), and the
//! rustc-style rendering of diagnostics quotes source lines.

use crate::alloc_bound::bound;
use crate::cases::Flagged;
use rpcrdma_xdrgen::Config;

/// The largest single allocation allowed for an input of `len` bytes (see above).
pub fn limit(len: usize) -> usize {
    bound(len, 1024, 4 << 20)
}

/// One run on a raw input: returns normally, or panics on a finding.
pub fn run(data: &[u8]) {
    let case = Flagged::split(data);
    let text = String::from_utf8_lossy(case.rest);
    let mut config = Config::new();
    config
        .lenient(case.flags & 1 != 0)
        .services(case.flags & 2 != 0);
    if case.flags & 4 != 0 {
        config.ddp("ddp");
    }
    let comp = config.check_sources(&[("fuzz.x", &text)]);
    // Rendering (codespan-reporting) took two thirds of a run on mutated inputs, which
    // report dozens of defects each: it is done when bit 3 asks for it, for the first
    // eight diagnostics (each is rendered on its own, so eight reach every path), so that
    // the fuzzer spends its time on lexing, parsing, checking and generating.
    if case.flags & 8 != 0 {
        let items = &comp.diagnostics.items;
        let rendered = comp.sources.render(&items[..items.len().min(8)]);
        assert_eq!(rendered.is_empty(), items.is_empty());
    }
    if !comp.has_errors() {
        let code = comp.generate().expect("no errors, so generation succeeds");
        assert!(!code.is_empty());
    }
}
