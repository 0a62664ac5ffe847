//! Configurable bounds on what a decoder accepts.

/// Bounds applied while decoding, so that hostile input cannot make a decoder allocate or
/// recurse without limit. Declared maximums from the XDR (`opaque data<1024>`) are enforced in
/// addition to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest message, in bytes, a decoder accepts at all.
    pub max_message: usize,
    /// The largest element count of any one variable-length array or linked list.
    pub max_elements: u32,
    /// The deepest nesting of recursive (boxed) values.
    pub max_depth: u32,
    /// Reject opaque and string padding that is not zero (RFC 4506 section 4.10 says the pad
    /// bytes are zero; many implementations do not check).
    pub strict_padding: bool,
}

impl Limits {
    /// Limits suited to RPC-over-RDMA headers and ordinary RPC messages.
    pub const DEFAULT: Limits = Limits {
        // 64 MiB of payload and 64 KiB besides: `rpc::DEFAULT_MAX_MESSAGE`, the bound of a
        // record over TCP and of a call's Read chunks over RPC-over-RDMA.
        max_message: (64 << 20) + (64 << 10),
        max_elements: 1 << 20,
        max_depth: 64,
        strict_padding: false,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
