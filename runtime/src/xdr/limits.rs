//! Configurable bounds on what a decoder accepts.

/// Bounds applied while decoding, so that hostile input cannot make a decoder allocate or
/// recurse without limit, and the rule it holds padding to. Declared maximums from the XDR
/// (`opaque data<1024>`) are enforced in addition to these.
///
/// The defaults ([`Limits::DEFAULT`]) suit canonical encodings, where one value has exactly
/// one encoding (Stellar's ledger, anything hashed or signed as XDR), as well as ONC RPC:
/// non-zero padding is refused ([`strict_padding`](Self::strict_padding)) and values nest up
/// to 500 recursive levels ([`max_depth`](Self::max_depth)), which a 2 MiB thread stack
/// (tokio's worker default) decodes with room to spare, in a debug build too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest message, in bytes, a decoder accepts at all.
    pub max_message: usize,
    /// The largest element count of any one variable-length array or linked list.
    pub max_elements: u32,
    /// The deepest nesting of recursive values: each value of a recursive type, and each
    /// [`Box`] of one, counts a level while it is decoded. It bounds the decoder's recursion,
    /// so that input nested without end ends in [`ErrorKind::TooDeep`](super::ErrorKind)
    /// rather than a stack overflow.
    ///
    /// The default, 500, lets through the deepest values real users send: a Stellar
    /// contract value nested as deep as the Soroban host lets a contract build one (100
    /// values, each a map or vector of the next) takes 300 levels; Stellar's own codec reads
    /// to 500 levels of every type nested, not only recursive ones. A level of the
    /// generated decoders costs up to about 0.9 KiB of stack in a debug build (the most of
    /// the recursive shapes measured: a Stellar value nested through vectors), so 500 levels
    /// take under 450 KiB of a 2 MiB stack, leaving three quarters of it to the caller; a
    /// release build takes about a fifth of that. A type that holds large fixed-length
    /// arrays in each level costs more per level: lower this, or decode on a thread with a
    /// larger stack.
    pub max_depth: u32,
    /// Refuse opaque and string padding that is not zero.
    ///
    /// RFC 4506 section 4.10: the bytes are "followed by enough (0 to 3) residual zero bytes,
    /// r, to make the total byte count a multiple of four". On by default, for canonical
    /// encodings: with it off, several byte strings decode to the same value, which breaks
    /// anything that hashes, signs or compares XDR; Stellar's codecs refuse such padding as
    /// well. It refuses nothing that ONC RPC peers send: rpcgen's library (libtirpc, glibc's
    /// Sun RPC) and the Linux kernel write zeros, and merely never look at the bytes when
    /// they decode. Turn it off to accept an encoder that leaves garbage there.
    pub strict_padding: bool,
}

impl Limits {
    /// The default limits: messages up to 64 MiB, a million elements per array or list,
    /// 500 levels of recursion, zero padding required (see the fields for why).
    pub const DEFAULT: Limits = Limits {
        // 64 MiB of payload and 64 KiB besides: `rpc::DEFAULT_MAX_MESSAGE`, the bound of a
        // record over TCP and of a call's Read chunks over RPC-over-RDMA.
        max_message: (64 << 20) + (64 << 10),
        max_elements: 1 << 20,
        max_depth: 500,
        strict_padding: true,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
