//! The callback program as an `rpc::Service`: CB_NULL and CB_COMPOUND, the latter decoded
//! leniently.
//!
//! The generated decoder refuses a CB_COMPOUND holding an operation number outside
//! `nfs_cb_opnum4` (the union has no default arm), which the RPC layer answers GARBAGE_ARGS.
//! RFC 5661 section 20.13 wants `OP_CB_ILLEGAL` / `NFS4ERR_OP_ILLEGAL` instead, and a minor
//! version this client does not speak wants `NFS4ERR_MINOR_VERS_MISMATCH` whatever its
//! operations hold. So the header is read here, each operation decoded by the generated code
//! while its number is known, and the rest of the message skipped at the first that is not
//! (nothing after it can be told apart).

use rpcrdma::rpc::{handler, CallContext, DispatchError, HandlerFuture, ReplyError, Service};
use rpcrdma::xdr::{self, Decode, Decoder};

use super::CallbackService;
use crate::nfs4::nfs4_callback::nfs_cb::{self, CbCompound, CbNull};
use crate::nfs4::{CbCompound4args, NfsCbArgop4, NfsCbOpnum4, Utf8strCs};
use rpcrdma::xdr::Procedure;

/// The smallest encoded operation: its number.
const MIN_OP_LEN: usize = 4;

/// Routes CB_NULL and CB_COMPOUND to a [`CallbackService`].
pub(super) struct CallbackProgram(pub(super) CallbackService);

impl Service for CallbackProgram {
    fn program(&self) -> u32 {
        self.0.program()
    }

    fn version(&self) -> u32 {
        nfs_cb::VERSION
    }

    fn call(
        &self,
        _ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        match procedure {
            CbNull::PROCEDURE => Ok(handler(async { Ok::<(), ReplyError>(()) })),
            CbCompound::PROCEDURE => {
                let (args, unknown) = decode_lenient(args).map_err(DispatchError::Args)?;
                let service = self.0.clone();
                Ok(handler(async move {
                    Ok::<_, ReplyError>(service.answer_decoded(args, unknown))
                }))
            }
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

/// Reads `CB_COMPOUND4args`, stopping at the first operation whose number is unknown: the
/// arguments read, and that number. Skips the operations of a minor version other than 1.
pub(super) fn decode_lenient(dec: &mut Decoder<'_>) -> xdr::Result<(CbCompound4args, Option<u32>)> {
    let mut args = CbCompound4args {
        tag: Utf8strCs::decode(dec)?,
        minorversion: dec.get_u32()?,
        callback_ident: dec.get_u32()?,
        argarray: Vec::new(),
    };
    if args.minorversion != 1 {
        dec.skip(dec.remaining())?;
        return Ok((args, None));
    }
    let count = dec.get_count(None, MIN_OP_LEN)?;
    for _ in 0..count {
        let op = dec.clone().get_u32()?;
        if i32::try_from(op)
            .ok()
            .and_then(NfsCbOpnum4::from_value)
            .is_none()
        {
            dec.skip(dec.remaining())?;
            return Ok((args, Some(op)));
        }
        args.argarray.push(NfsCbArgop4::decode(dec)?);
    }
    Ok((args, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rpcrdma::xdr::{Encode, Encoder};

    fn encode(f: impl FnOnce(&mut Encoder)) -> Bytes {
        let mut enc = Encoder::new();
        f(&mut enc);
        enc.finish().into_bytes()
    }

    #[test]
    fn stops_at_an_unknown_operation_and_skips_the_rest() {
        let message = encode(|enc| {
            enc.put_opaque_slice(b"t", None).unwrap();
            enc.put_u32(1);
            enc.put_u32(0);
            enc.put_u32(3);
            NfsCbArgop4::OpCbIllegal.encode(enc).unwrap();
            enc.put_u32(99);
            enc.put_u32(0xdead_beef);
        });
        let mut dec = Decoder::new(&message);
        let (args, unknown) = decode_lenient(&mut dec).unwrap();
        assert_eq!(args.argarray, vec![NfsCbArgop4::OpCbIllegal]);
        assert_eq!(unknown, Some(99));
        dec.finish().unwrap();
    }

    #[test]
    fn skips_the_operations_of_another_minor_version() {
        let message = encode(|enc| {
            enc.put_opaque_slice(b"", None).unwrap();
            enc.put_u32(2);
            enc.put_u32(0);
            enc.put_u32(1);
            enc.put_u32(77);
        });
        let mut dec = Decoder::new(&message);
        let (args, unknown) = decode_lenient(&mut dec).unwrap();
        assert_eq!(
            (args.minorversion, args.argarray.len(), unknown),
            (2, 0, None)
        );
        dec.finish().unwrap();
    }

    #[test]
    fn rejects_a_count_the_message_cannot_hold() {
        let message = encode(|enc| {
            enc.put_opaque_slice(b"", None).unwrap();
            enc.put_u32(1);
            enc.put_u32(0);
            enc.put_u32(u32::MAX);
        });
        assert!(decode_lenient(&mut Decoder::new(&message)).is_err());
    }
}
