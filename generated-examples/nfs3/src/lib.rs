//! NFS version 3 ([RFC 1813]) and its Upper-Layer Binding to RPC-over-RDMA version 1
//! ([RFC 8267]).
//!
//! This crate carries the inputs that the generated NFSv3 codec is built from, so that tests and
//! build scripts read one copy of them:
//!
//! - [`SPEC`]: `specs/nfs3.x`, the protocol in RFC 4506 XDR, whose four DDP-eligible items carry
//!   a `/* @ddp */` annotation;
//! - [`BINDING`]: `specs/nfs3.ddp`, the same four marks as a binding file.
//!
//! `tests/vectors/` holds hand-computed encodings cross-checked against rpcgen; `tests/` checks
//! that the two forms of the binding agree and that the vectors are well formed. Where each
//! part comes from is recorded in `specs/NFS3-NOTES.md`.
//!
//! [RFC 1813]: https://www.rfc-editor.org/rfc/rfc1813
//! [RFC 8267]: https://www.rfc-editor.org/rfc/rfc8267
#![warn(missing_docs)]

/// The NFSv3 protocol XDR (`specs/nfs3.x`), with `/* @ddp */` marks.
pub const SPEC: &str = include_str!("../../../specs/nfs3.x");

/// The NFSv3 DDP-eligibility binding file (`specs/nfs3.ddp`): one `Type.field` mark a line.
pub const BINDING: &str = include_str!("../../../specs/nfs3.ddp");

/// The DDP-eligible items of NFS versions 2 and 3 as RFC 8267 section 4 lists them, written as
/// `(struct, field)` of `specs/nfs3.x`, in the RFC's order.
pub const RFC8267_DDP_ELIGIBLE: [(&str, &str); 4] = [
    // "The opaque file data argument in the NFS WRITE procedure"
    ("WRITE3args", "data"),
    // "The pathname argument in the NFS SYMLINK procedure"
    ("symlinkdata3", "symlink_data"),
    // "The opaque file data result in the NFS READ procedure"
    ("READ3resok", "data"),
    // "The pathname result in the NFS READLINK procedure"
    ("READLINK3resok", "data"),
];
