use rpcrdma::xdr::Bytes;
use rpcrdma::{DdpEligible, Xdr};

#[derive(Xdr, DdpEligible)]
struct ReadArgs {
    #[xdr(ddp)]
    offset: u64,
    #[xdr(ddp)]
    count: Option<u32>,
    #[xdr(ddp, list)]
    segments: Vec<u32>,
    #[xdr(ddp)]
    data: Bytes,
}

fn main() {}
