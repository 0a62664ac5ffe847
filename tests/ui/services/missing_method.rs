// An implementation of a generated server trait must answer every procedure of the version:
// CALCPROC_MUL is missing here.
use integration_tests::calc::calc_prog::calc_v1::{self, CalcV1Server};
use integration_tests::calc::{GetRes, Pair};
use rpcrdma::rpc::{CallContext, ReplyError, ServerBuilder};

struct Calc;

impl CalcV1Server for Calc {
    async fn calcproc_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn calcproc_add(&self, _ctx: CallContext, args: Pair) -> Result<i32, ReplyError> {
        Ok(args.a.wrapping_add(args.b))
    }

    async fn calcproc_get(&self, _ctx: CallContext, _args: u64) -> Result<GetRes, ReplyError> {
        Err(ReplyError::ProcUnavail)
    }

    async fn calcproc_reset(&self, _ctx: CallContext, _args: i32) -> Result<(), ReplyError> {
        Ok(())
    }
}

fn main() {
    let mut server = ServerBuilder::new();
    calc_v1::register(&mut server, Calc);
}
