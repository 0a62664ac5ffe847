//! The fuzz targets' bodies, one module each; `fuzz_targets/NAME.rs` runs `NAME::run` under
//! `NAME::limit` for libFuzzer, and `tests/replay.rs` runs every committed seed and regression
//! input through the same function under the same bound.

pub mod iwarp_frames;
pub mod mpa_setup;
pub mod nfs3_chunks;
pub mod rpc_record;
pub mod v1_header;
pub mod v2_header;
pub mod xdrgen_frontend;

/// A target: its name (the binary, and the folder of its seeds), its body and its bound.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The name of the binary and of `seeds/NAME/`.
    pub name: &'static str,
    /// One run on a raw input; panics on a finding.
    pub run: fn(&[u8]),
    /// The largest single allocation allowed for an input of this many bytes.
    pub limit: fn(usize) -> usize,
}

/// Every target, in the order `scripts/fuzz` runs them.
pub const ALL: [Target; 7] = [
    Target {
        name: "v1_header",
        run: v1_header::run,
        limit: v1_header::limit,
    },
    Target {
        name: "v2_header",
        run: v2_header::run,
        limit: v2_header::limit,
    },
    Target {
        name: "nfs3_chunks",
        run: nfs3_chunks::run,
        limit: nfs3_chunks::limit,
    },
    Target {
        name: "iwarp_frames",
        run: iwarp_frames::run,
        limit: iwarp_frames::limit,
    },
    Target {
        name: "mpa_setup",
        run: mpa_setup::run,
        limit: mpa_setup::limit,
    },
    Target {
        name: "rpc_record",
        run: rpc_record::run,
        limit: rpc_record::limit,
    },
    Target {
        name: "xdrgen_frontend",
        run: xdrgen_frontend::run,
        limit: xdrgen_frontend::limit,
    },
];
