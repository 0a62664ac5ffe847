use rpcrdma::Xdr;

#[derive(Xdr)]
struct Owner {
    name: String,
    group: Option<String>,
}

fn main() {}
