use std::collections::HashMap;

use rpcrdma::Xdr;

#[derive(Xdr)]
struct Everything<'a> {
    attrs: HashMap<u32, u32>,
    borrowed: &'a [u32],
    small: u8,
    size: usize,
    data: Vec<u8>,
    key: [u8; 16],
    wide: u128,
}

fn main() {}
