use rpcrdma::Xdr;

#[derive(Xdr)]
enum Status {
    #[xdr(case = 0)]
    Ok,
    #[xdr(default)]
    Other(#[xdr(discriminant)] i32),
    #[xdr(default)]
    Another(#[xdr(discriminant)] i32),
}

fn main() {}
