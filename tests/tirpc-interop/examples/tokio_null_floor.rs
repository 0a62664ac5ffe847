//! The least a tokio client can do for a NULL call: the floor under our TCP client.
//!
//! `tokio_null_floor PORT CALLS` makes CALLS NULL calls of `interop.x` (after a tenth as many
//! unmeasured) to a server on 127.0.0.1:PORT, one at a time, from a spawned task on a
//! current-thread runtime, as the transports bench's `--client tcp` does; and prints
//! `mean_us=...` as the C client does. Each call is one prepared record (its XID set) written
//! with `write_all` and a reply read until its 28 bytes are in: no XID matching, no decoding,
//! no timeout, no reconnecting. So what it costs is tokio's and the kernel's part of a round
//! trip, and our client's cost above it is our own (`scripts/tcp-profile` compares the three).

use std::time::Instant;

use rpcrdma::rpc::{encode_call_header, Credentials, RecordWriter};
use rpcrdma::xdr::Encoder;
use rpcrdma::xdr::Procedure;
use tirpc_interop::interop::interop_prog::interop_vers::InteropNull;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A NULL reply with AUTH_NONE: record mark, XID, REPLY, MSG_ACCEPTED, verifier flavor and
/// length, SUCCESS.
const REPLY_LEN: usize = 28;

/// The NULL call as one record (one fragment), encoded once by our header encoder; each call
/// writes its XID (bytes 4..8) into it.
fn null_call_record() -> Vec<u8> {
    let none = Credentials::None
        .to_opaque_auth()
        .expect("AUTH_NONE encodes");
    let mut enc = Encoder::new();
    encode_call_header(
        &mut enc,
        0,
        InteropNull::PROGRAM,
        InteropNull::VERSION,
        InteropNull::PROCEDURE,
        &none,
        &none,
    )
    .expect("a call header");
    let mut pieces = Vec::new();
    RecordWriter::default().frame(enc.finish().parts(), &mut pieces);
    pieces.concat()
}

async fn calls(stream: &mut TcpStream, first_xid: u32, n: u32) -> std::io::Result<()> {
    let mut record = null_call_record();
    let mut reply = [0u8; 256];
    for xid in first_xid..first_xid + n {
        record[4..8].copy_from_slice(&xid.to_be_bytes());
        stream.write_all(&record).await?;
        let mut got = 0;
        while got < REPLY_LEN {
            match stream.read(&mut reply[got..]).await? {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                n => got += n,
            }
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(port), Some(n)) = (
        args.first().and_then(|a| a.parse::<u16>().ok()),
        args.get(1).and_then(|a| a.parse::<u32>().ok()),
    ) else {
        eprintln!("usage: tokio_null_floor PORT CALLS");
        return std::process::ExitCode::from(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .expect("a runtime");
    let mean_us = runtime.block_on(async move {
        tokio::spawn(async move {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
            stream.set_nodelay(true)?;
            calls(&mut stream, 0, n / 10).await?;
            let start = Instant::now();
            calls(&mut stream, n / 10, n).await?;
            Ok::<f64, std::io::Error>(start.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1)))
        })
        .await
        .expect("the calling task")
    });
    match mean_us {
        Ok(us) => {
            println!("mean_us={us}");
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("tokio_null_floor: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
