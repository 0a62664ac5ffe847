//! Reading the operations of a COMPOUND or CB_COMPOUND whose numbers may be unknown.
//!
//! The generated decoders refuse an operation number outside `nfs_opnum4` / `nfs_cb_opnum4`
//! (their unions have no default arm), which the RPC layer would answer GARBAGE_ARGS. RFC 5661
//! wants such an operation answered as ILLEGAL after the operations before it ran (section
//! 15.2 for COMPOUND, 20.13 for CB_COMPOUND), so the server and the client's callback service
//! read the array here: each operation by the generated code while its number is known, the
//! rest of the message skipped at the first that is not (nothing after it can be told apart).

use rpcrdma::xdr::{self, Decode, Decoder};

/// The smallest encoded operation: its number.
const MIN_OP_LEN: usize = 4;

/// Reads an operation array (its count, then the operations) until the first operation whose
/// number `known` refuses: the operations read, and that number.
pub(crate) fn decode_ops<Op: Decode>(
    dec: &mut Decoder<'_>,
    known: impl Fn(i32) -> bool,
) -> xdr::Result<(Vec<Op>, Option<u32>)> {
    let count = dec.get_count(None, MIN_OP_LEN)?;
    let mut ops = Vec::new();
    for _ in 0..count {
        let op = dec.clone().get_u32()?;
        if !i32::try_from(op).is_ok_and(&known) {
            dec.skip(dec.remaining())?;
            return Ok((ops, Some(op)));
        }
        ops.push(Op::decode(dec)?);
    }
    Ok((ops, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::{NfsArgop4, NfsOpnum4};
    use bytes::Bytes;
    use rpcrdma::xdr::{Encode, Encoder};

    fn encode(f: impl FnOnce(&mut Encoder)) -> Bytes {
        let mut enc = Encoder::new();
        f(&mut enc);
        enc.finish().into_bytes()
    }

    fn known(n: i32) -> bool {
        NfsOpnum4::from_value(n).is_some()
    }

    #[test]
    fn stops_at_an_unknown_operation_and_skips_the_rest() {
        let message = encode(|enc| {
            enc.put_u32(3);
            NfsArgop4::OpPutrootfh.encode(enc).unwrap();
            enc.put_u32(9999);
            enc.put_u32(0xdead_beef);
        });
        let mut dec = Decoder::new(&message);
        let (ops, unknown) = decode_ops::<NfsArgop4>(&mut dec, known).unwrap();
        assert_eq!(ops, vec![NfsArgop4::OpPutrootfh]);
        assert_eq!(unknown, Some(9999));
        dec.finish().unwrap();
    }

    #[test]
    fn a_number_beyond_i32_is_unknown() {
        let message = encode(|enc| {
            enc.put_u32(1);
            enc.put_u32(u32::MAX);
        });
        let (ops, unknown) = decode_ops::<NfsArgop4>(&mut Decoder::new(&message), known).unwrap();
        assert!(ops.is_empty());
        assert_eq!(unknown, Some(u32::MAX));
    }

    #[test]
    fn rejects_a_count_the_message_cannot_hold() {
        let message = encode(|enc| enc.put_u32(u32::MAX));
        assert!(decode_ops::<NfsArgop4>(&mut Decoder::new(&message), known).is_err());
    }
}
