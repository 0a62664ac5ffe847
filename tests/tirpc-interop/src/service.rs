//! Our server for `interop.x`, written by hand the way generated server code will look: a
//! trait with one async method per procedure ([`InteropV1`]), and an adapter that makes an
//! implementation an [`rpc::Service`] ([`register`]). When xdrgen generates server traits,
//! the trait and the adapter here give way to the generated ones and [`Reference`] stays.

use std::future::Future;
use std::sync::Arc;

use rpcrdma::rpc::{
    self, decode_args, handler, CallContext, DispatchError, HandlerFuture, ReplyError,
    ServerBuilder,
};
use rpcrdma::xdr::{Decoder, Procedure};

use crate::interop::interop_prog::{self, interop_vers};
use crate::interop::{EchoData, MixedArgs, MixedRes};

/// Version 1 of the program, one method per procedure.
pub trait InteropV1: Send + Sync + 'static {
    /// INTEROP_NULL (0).
    fn interop_null(&self) -> impl Future<Output = Result<(), ReplyError>> + Send;
    /// ECHO (1).
    fn echo(&self, data: EchoData) -> impl Future<Output = Result<EchoData, ReplyError>> + Send;
    /// MIX (2).
    fn mix(&self, args: MixedArgs) -> impl Future<Output = Result<MixedRes, ReplyError>> + Send;
    /// FAIL (3).
    fn fail(&self) -> impl Future<Output = Result<(), ReplyError>> + Send;
}

/// The program as `interop.x` defines it: ECHO echoes, MIX is [`crate::mix`], FAIL answers
/// SYSTEM_ERR.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reference;

impl InteropV1 for Reference {
    async fn interop_null(&self) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn echo(&self, data: EchoData) -> Result<EchoData, ReplyError> {
        Ok(data)
    }

    async fn mix(&self, args: MixedArgs) -> Result<MixedRes, ReplyError> {
        Ok(crate::mix(&args))
    }

    async fn fail(&self) -> Result<(), ReplyError> {
        Err(ReplyError::SystemErr)
    }
}

/// Hosts `implementation` as version 1 of the program on `builder`.
pub fn register<T: InteropV1>(builder: &mut ServerBuilder, implementation: T) {
    builder.add(V1Service(Arc::new(implementation)));
}

struct V1Service<T>(Arc<T>);

impl<T: InteropV1> rpc::Service for V1Service<T> {
    fn program(&self) -> u32 {
        interop_prog::PROGRAM
    }

    fn version(&self) -> u32 {
        interop_vers::VERSION
    }

    fn call(
        &self,
        _: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        let imp = self.0.clone();
        match procedure {
            interop_vers::InteropNull::PROCEDURE => {
                Ok(handler(async move { imp.interop_null().await }))
            }
            interop_vers::Echo::PROCEDURE => {
                let data: EchoData = decode_args(args)?;
                Ok(handler(async move { imp.echo(data).await }))
            }
            interop_vers::Mix::PROCEDURE => {
                let mix_args: MixedArgs = decode_args(args)?;
                Ok(handler(async move { imp.mix(mix_args).await }))
            }
            interop_vers::Fail::PROCEDURE => Ok(handler(async move { imp.fail().await })),
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}
