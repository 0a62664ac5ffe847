use rpcrdma::xdr::{Bytes, XdrString};
use rpcrdma::Xdr;

#[derive(Xdr)]
struct Args {
    #[xdr(max = 8)]
    count: u32,
    #[xdr(fixed = 8)]
    name: XdrString,
    #[xdr(max = 4, fixed = 4)]
    data: Bytes,
    #[xdr(list, max = 4)]
    items: Vec<u32>,
    #[xdr(max = 5_000_000_000)]
    huge: Bytes,
}

fn main() {}
