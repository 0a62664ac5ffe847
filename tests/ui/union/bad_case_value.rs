use rpcrdma::Xdr;

#[derive(Xdr)]
#[xdr(switch = u32)]
enum Unsigned {
    #[xdr(case = -1)]
    Minus(u32),
    #[xdr(case = true)]
    Yes,
    #[xdr(case = 1 + 1)]
    Sum,
}

#[derive(Xdr)]
#[xdr(switch = &'static str)]
enum Named {
    #[xdr(case = 0)]
    A,
}

fn main() {}
