//! Our server for `interop.x`: an implementation of the server trait xdrgen generates for it
//! ([`InteropVersServer`]), hosted with the generated `register`.

use std::sync::Mutex;

use rpcrdma::rpc::{CallContext, ReplyError, ServerBuilder};

use crate::interop::interop_prog::interop_vers::{self, InteropVersServer};
use crate::interop::{EchoData, MixedArgs, MixedRes};

/// The program as `interop.x` defines it: ECHO echoes, MIX is [`crate::mix`], FAIL answers
/// SYSTEM_ERR, FILL answers LEN bytes of 0xa5, SINK the length it received.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reference;

impl InteropVersServer for Reference {
    async fn interop_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn echo(&self, _ctx: CallContext, data: EchoData) -> Result<EchoData, ReplyError> {
        Ok(data)
    }

    async fn mix(&self, _ctx: CallContext, args: MixedArgs) -> Result<MixedRes, ReplyError> {
        Ok(crate::mix(&args))
    }

    async fn fail(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Err(ReplyError::SystemErr)
    }

    async fn fill(&self, _ctx: CallContext, len: u32) -> Result<EchoData, ReplyError> {
        // As the C server does: one buffer, filled once and grown when a call asks for more.
        static FILLED: Mutex<EchoData> = Mutex::new(EchoData::new());
        let mut filled = FILLED.lock().unwrap_or_else(|e| e.into_inner());
        if filled.len() < len as usize {
            *filled = EchoData::from(vec![0xa5; len as usize]);
        }
        Ok(filled.slice(..len as usize))
    }

    async fn sink(&self, _ctx: CallContext, data: EchoData) -> Result<u32, ReplyError> {
        Ok(data.len() as u32)
    }
}

/// Hosts `implementation` as version 1 of the program on `builder`.
pub fn register<T: InteropVersServer>(builder: &mut ServerBuilder, implementation: T) {
    interop_vers::register(builder, implementation);
}
