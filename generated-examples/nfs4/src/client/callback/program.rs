//! The callback program as an `rpc::Service`: CB_NULL and CB_COMPOUND, the latter decoded
//! leniently.
//!
//! An operation number outside `nfs_cb_opnum4` is answered `OP_CB_ILLEGAL` /
//! `NFS4ERR_OP_ILLEGAL` (RFC 5661 section 20.13), not GARBAGE_ARGS (see `crate::lenient`); a
//! minor version this client does not speak gets `NFS4ERR_MINOR_VERS_MISMATCH` whatever its
//! operations hold.

use rpcrdma::rpc::{handler, CallContext, DispatchError, HandlerFuture, ReplyError, Service};
use rpcrdma::xdr::{self, Decode, Decoder};

use super::CallbackService;
use crate::lenient;
use crate::nfs4::nfs4_callback::nfs_cb::{self, CbCompound, CbNull};
use crate::nfs4::{CbCompound4args, NfsCbOpnum4, Utf8strCs};
use rpcrdma::xdr::Procedure;

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
    let (ops, unknown) = lenient::decode_ops(dec, |n| NfsCbOpnum4::from_value(n).is_some())?;
    args.argarray = ops;
    Ok((args, unknown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::NfsCbArgop4;
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
}
