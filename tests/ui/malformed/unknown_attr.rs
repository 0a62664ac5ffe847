use rpcrdma::xdr::Bytes;
use rpcrdma::Xdr;

#[derive(Xdr)]
struct Args {
    #[xdr(maximum = 8)]
    a: Bytes,
    #[xdr(list = true)]
    b: Vec<u32>,
    #[xdr(max = 4, max = 8)]
    c: Bytes,
    #[xdr]
    d: u32,
}

fn main() {}
