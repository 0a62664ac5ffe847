use rpcrdma::Xdr;

#[derive(Xdr)]
#[repr(i32)]
enum Reply {
    #[xdr(case = 0)]
    Accepted(u32),
    Denied(u32),
    #[xdr(default)]
    Other,
    #[xdr(case = 3)]
    Rust = 3,
}

fn main() {}
