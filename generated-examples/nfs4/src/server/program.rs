//! The NFSv4 program as an `rpc::Service`: NULL and COMPOUND, the latter decoded leniently.
//!
//! An operation number outside `nfs_opnum4` is answered `OP_ILLEGAL` with `NFS4ERR_OP_ILLEGAL`
//! (RFC 5661 sections 15.2 and 18.52.3) after the operations before it ran, not GARBAGE_ARGS
//! (see `crate::lenient`); a minor version the server does not do gets
//! `NFS4ERR_MINOR_VERS_MISMATCH` (section 16.2.3) whatever its operations hold.

use rpcrdma::rpc::{handler, CallContext, DispatchError, HandlerFuture, Service};
use rpcrdma::xdr::{self, Decode, Decoder, Procedure};

use super::Nfs4Server;
use crate::lenient;
use crate::nfs4::nfs4_program::nfs_v4::{self, NfsV4Server, Nfsproc4Compound, Nfsproc4Null};
use crate::nfs4::{Compound4args, NfsArgop4, NfsOpnum4, Utf8strCs};

/// Routes NULL and COMPOUND to an [`Nfs4Server`].
pub(super) struct Nfs4Program(pub(super) Nfs4Server);

impl Service for Nfs4Program {
    fn program(&self) -> u32 {
        crate::nfs4::nfs4_program::PROGRAM
    }

    fn version(&self) -> u32 {
        nfs_v4::VERSION
    }

    fn call(
        &self,
        ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        let server = self.0.clone();
        match procedure {
            Nfsproc4Null::PROCEDURE => Ok(handler(async move { server.nfsproc4_null(ctx).await })),
            Nfsproc4Compound::PROCEDURE => {
                let args = decode_lenient(args).map_err(DispatchError::Args)?;
                Ok(handler(
                    async move { server.nfsproc4_compound(ctx, args).await },
                ))
            }
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

/// Reads `COMPOUND4args`, an operation whose number is unknown read as `OP_ILLEGAL` and
/// ending the array. Skips the operations of a minor version other than 1.
fn decode_lenient(dec: &mut Decoder<'_>) -> xdr::Result<Compound4args> {
    let mut args = Compound4args {
        tag: Utf8strCs::decode(dec)?,
        minorversion: dec.get_u32()?,
        argarray: Vec::new(),
    };
    if args.minorversion != 1 {
        dec.skip(dec.remaining())?;
        return Ok(args);
    }
    let (ops, unknown) = lenient::decode_ops(dec, |n| NfsOpnum4::from_value(n).is_some())?;
    args.argarray = ops;
    if unknown.is_some() {
        args.argarray.push(NfsArgop4::OpIllegal);
    }
    Ok(args)
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
    fn an_unknown_operation_is_illegal_and_ends_the_array() {
        let message = encode(|enc| {
            enc.put_opaque_slice(b"t", None).unwrap();
            enc.put_u32(1);
            enc.put_u32(3);
            NfsArgop4::OpPutrootfh.encode(enc).unwrap();
            enc.put_u32(9999);
            enc.put_u32(0xdead_beef);
        });
        let mut dec = Decoder::new(&message);
        let args = decode_lenient(&mut dec).unwrap();
        assert_eq!(
            args.argarray,
            vec![NfsArgop4::OpPutrootfh, NfsArgop4::OpIllegal]
        );
        dec.finish().unwrap();
    }

    #[test]
    fn skips_the_operations_of_another_minor_version() {
        let message = encode(|enc| {
            enc.put_opaque_slice(b"", None).unwrap();
            enc.put_u32(7);
            enc.put_u32(1);
            enc.put_u32(77);
        });
        let mut dec = Decoder::new(&message);
        let args = decode_lenient(&mut dec).unwrap();
        assert_eq!((args.minorversion, args.argarray.len()), (7, 0));
        dec.finish().unwrap();
    }
}
