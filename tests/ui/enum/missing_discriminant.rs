use rpcrdma::Xdr;

#[derive(Xdr)]
enum Stable {
    Unstable = 0,
    DataSync,
    FileSync = 2,
    TooBig = 0x1_0000_0000,
}

fn main() {}
