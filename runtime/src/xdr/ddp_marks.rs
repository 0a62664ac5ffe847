//! Which fields of a type an Upper Layer Binding lets move as RDMA chunks.
//!
//! RFC 8166 section 4.4.1: "An Upper Layer Binding states which specific individual XDR data
//! items in an Upper Layer Protocol MAY be transferred via Direct Data Placement." Only
//! opaque data, strings and arrays qualify (section 6.1); a union never does, but fields of
//! its arms may (section 4.4.3.2).

/// A type some of whose fields are DDP-eligible.
///
/// Implemented by `#[derive(DdpEligible)]` from `#[xdr(ddp)]` marks (feature `derive`).
/// The chunk-aware encoder and decoder build on this list.
pub trait DdpEligible {
    /// The DDP-eligible fields in declaration order: a field name, a tuple index, or
    /// `Variant.field` for a field of a union arm.
    const DDP_FIELDS: &'static [&'static str];
}
