use rpcrdma::xdr::Bytes;
use rpcrdma::{DdpEligible, Xdr};

#[derive(Xdr, DdpEligible)]
#[xdr(ddp)]
enum ReadRes {
    #[xdr(case = 0)]
    Ok(Bytes),
    #[xdr(case = 1, ddp)]
    Err(Bytes),
}

#[derive(Xdr, DdpEligible)]
enum Stable {
    Unstable = 0,
    FileSync = 2,
}

fn main() {}
