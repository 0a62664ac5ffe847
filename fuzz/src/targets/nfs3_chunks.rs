//! The generated NFSv3 decoders (RFC 1813 with the RFC 8267 DDP marks) as a responder and a
//! requester run them: an inline XDR stream plus the chunk data the transport received (Read
//! chunks with their positions for calls, Write chunks for replies), then the check that the
//! chunks were used as the message says. A value that decodes must encode inline and decode
//! back to itself.
//!
//! Input: [`rpcrdma_fuzz::cases::Nfs3Case`]; the selector picks a call (arguments, or a whole
//! RPC call message with WRITE3args) or a reply type.
//!
//! Allocation bound: 64 x input + 64 KiB. Chunk data is shared with the input, never copied;
//! lists (directory entries) are bounded by the bytes left, as in the headers.

use std::fmt::Debug;

use crate::alloc_bound::bound;
use crate::cases::Nfs3Case;
use bytes::Bytes;
use rpcrdma::xdr::{
    from_bytes, to_bytes, AlignPadding, Decode, Decoder, Encode, ReceivedChunks,
};
use rpcrdma_nfs3::nfs3::*;
use rpcrdma_nfs3::rpc_msg::RpcMsg;

/// Decodes `T` from `inline` with `chunks`; on success the chunks must have been used as
/// RFC 8166 demands, and the value must survive an inline round trip.
fn check<T: Decode + Encode + PartialEq + Debug>(inline: &Bytes, chunks: ReceivedChunks) {
    // The same bytes as an RDMA_MSGP message (2004 mode): the decoder skips padding before
    // large opaque data, and must not panic whatever the lengths say.
    let mut padded = Decoder::new(inline);
    padded.set_chunks(chunks.clone().with_alignment(AlignPadding::new(512, 64), 36));
    let _ = T::decode(&mut padded);
    let mut dec = Decoder::new(inline);
    dec.set_chunks(chunks);
    let Ok(value) = T::decode(&mut dec) else {
        return;
    };
    let chunks = dec.take_chunks().expect("the chunks set above");
    if chunks.finish().is_err() || dec.finish().is_err() {
        return;
    }
    let again = to_bytes(&value).expect("a decoded value encodes");
    let back: T = from_bytes(again).expect("our encoding decodes");
    assert_eq!(back, value);
}

/// A whole call: the RPC message header, then WRITE3args (the Read chunk's position counts
/// from the start of the RPC message).
#[derive(Debug, PartialEq)]
struct WriteCall(RpcMsg, Write3args);

impl Decode for WriteCall {
    fn decode(dec: &mut Decoder<'_>) -> rpcrdma::xdr::Result<Self> {
        Ok(WriteCall(RpcMsg::decode(dec)?, Write3args::decode(dec)?))
    }
}

impl Encode for WriteCall {
    fn encode(&self, enc: &mut rpcrdma::xdr::Encoder) -> rpcrdma::xdr::Result<()> {
        self.0.encode(enc)?;
        self.1.encode(enc)
    }
}

/// The largest single allocation allowed for an input of `len` bytes (see above).
pub fn limit(len: usize) -> usize {
    bound(len, 64, 64 << 10)
}

/// One run on a raw input: returns normally, or panics on a finding.
pub fn run(data: &[u8]) {
    let case = Nfs3Case::split(data);
    // Chunk data and the inline stream as slices of one buffer, as a transport hands
    // them over.
    let whole = Bytes::copy_from_slice(data);
    let slice = |s: &[u8]| {
        // `s` is a part of `data`: the same range of its copy.
        let at = s.as_ptr() as usize - data.as_ptr() as usize;
        whole.slice(at..at + s.len())
    };
    let inline = slice(case.inline);
    let reads =
        || ReceivedChunks::for_call(case.chunks.iter().map(|c| (c.position, slice(c.data))));
    let writes = || ReceivedChunks::for_reply(case.chunks.iter().map(|c| slice(c.data)));
    match case.selector % 16 {
        0 => check::<Write3args>(&inline, reads()),
        1 => check::<Symlink3args>(&inline, reads()),
        2 => check::<WriteCall>(&inline, reads()),
        3 => check::<Setattr3args>(&inline, reads()),
        4 => check::<Create3args>(&inline, reads()),
        5 => check::<Read3args>(&inline, reads()),
        6 => check::<Readdirplus3args>(&inline, reads()),
        7 => check::<Rename3args>(&inline, reads()),
        8 => check::<Read3res>(&inline, writes()),
        9 => check::<Readlink3res>(&inline, writes()),
        10 => check::<Getattr3res>(&inline, writes()),
        11 => check::<Lookup3res>(&inline, writes()),
        12 => check::<Readdir3res>(&inline, writes()),
        13 => check::<Readdirplus3res>(&inline, writes()),
        14 => check::<Write3res>(&inline, writes()),
        _ => check::<Fsinfo3res>(&inline, writes()),
    }
}
