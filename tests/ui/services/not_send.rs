// Handlers run as tasks on a multi-threaded runtime, so their futures must be Send: holding an
// `Rc` across an `.await` is refused where the method is implemented.
use std::rc::Rc;

use integration_tests::calc::calc_prog::calc_v1::CalcV1Server;
use integration_tests::calc::{GetRes, Pair};
use rpcrdma::rpc::{CallContext, ReplyError};

struct Calc;

impl CalcV1Server for Calc {
    async fn calcproc_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        let counter = Rc::new(0);
        std::future::ready(()).await;
        drop(counter);
        Ok(())
    }

    async fn calcproc_add(&self, _ctx: CallContext, args: Pair) -> Result<i32, ReplyError> {
        Ok(args.a.wrapping_add(args.b))
    }

    async fn calcproc_mul(
        &self,
        _ctx: CallContext,
        arg1: i32,
        arg2: i32,
        arg3: u32,
    ) -> Result<i32, ReplyError> {
        Ok(arg1.wrapping_mul(arg2).wrapping_mul(arg3 as i32))
    }

    async fn calcproc_get(&self, _ctx: CallContext, _args: u64) -> Result<GetRes, ReplyError> {
        Err(ReplyError::ProcUnavail)
    }

    async fn calcproc_reset(&self, _ctx: CallContext, _args: i32) -> Result<(), ReplyError> {
        Ok(())
    }
}

fn main() {}
