use rpcrdma::Xdr;

const OK: i32 = 0;
const ALSO_OK: i32 = 0;

#[derive(Xdr)]
enum Literal {
    #[xdr(case = 1)]
    A(u32),
    #[xdr(case = 2, case = 1)]
    B,
}

#[derive(Xdr)]
enum ThroughConstants {
    #[xdr(case = OK)]
    A(u32),
    #[xdr(case = ALSO_OK)]
    B,
}

fn main() {}
