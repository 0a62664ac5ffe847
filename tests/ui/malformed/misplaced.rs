use rpcrdma::Xdr;

#[derive(Xdr)]
#[xdr(switch = u32, max = 4)]
struct Args {
    #[xdr(case = 1)]
    a: u32,
    #[xdr(discriminant)]
    b: u32,
}

fn main() {}
