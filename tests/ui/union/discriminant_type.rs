use rpcrdma::Xdr;

#[derive(Xdr)]
#[xdr(switch = u32)]
enum Status {
    #[xdr(case = 0)]
    Ok,
    #[xdr(default)]
    Other(#[xdr(discriminant)] i64),
}

fn main() {}
