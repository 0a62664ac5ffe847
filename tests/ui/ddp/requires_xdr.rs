use rpcrdma::xdr::Bytes;
use rpcrdma::DdpEligible;

// DdpEligible without Xdr: DDP-eligibility only means something for an XDR type.
#[derive(DdpEligible)]
struct Payload {
    #[xdr(ddp)]
    data: Bytes,
}

#[derive(DdpEligible)]
union Raw {
    word: u32,
}

fn main() {}
