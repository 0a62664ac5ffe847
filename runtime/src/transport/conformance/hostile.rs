//! Cases where a peer speaks the wire format but lies: it gets the protocol's answer, and a
//! well-behaved client of the same server keeps being served.
//!
//! Every wait is for the event itself: an answer, the connection closing, or (for a message
//! that must go unanswered) the answer to a later message, which the server sends after
//! anything it would have answered first. [`STEP`] is only a safety net, so that a broken
//! server fails the case instead of hanging it; a loaded machine never gets near it.

use std::time::Duration;

use tokio::time::Instant;

use super::cases::{client_config, setup_with, Setup};
use super::program::*;
use crate::rdma::conformance::util::{ensure, Step, STEP};
use crate::rdma::conformance::{Failure, ProviderUnderTest};
use crate::rdma::{
    Access, ConnectParams, Connection, MemoryRegion, Provider, RecvWr, SendWr, Sge, WcOpcode,
    WcStatus,
};
use crate::transport::header::{self, Body, Chunks, Header, RdmaError, ReadChunk, Segment};
use crate::transport::private_data::PrivateData;
use crate::transport::RdmaConfig;
use crate::xdr::Encoder;

const RECV_SIZE: usize = 4096;
const RECEIVES: usize = 8;

/// A connection that sends hand-made messages.
pub(super) struct Raw<C: Connection> {
    pub(super) conn: C,
    recv: MemoryRegion,
    next: u64,
    /// Registrations the server may still read.
    pub(super) keep: Vec<MemoryRegion>,
}

/// What the server sent back.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// A message.
    Message(Vec<u8>),
    /// The connection went down.
    Closed,
    /// Neither, within the [`STEP`] safety net.
    Nothing,
}

/// XID of the NULL call that shows a message went unanswered (see [`Raw::nothing_answered`]).
pub(super) const SENTINEL: u32 = 0x05e4_71e1;

/// How often a wait looks whether the connection is still up, besides its completions.
const STATE_POLL: Duration = Duration::from_millis(50);

impl<C: Connection> Raw<C> {
    pub(super) async fn connect<P: Provider<Conn = C>>(s: &Setup<P>) -> Result<Raw<C>, Failure> {
        let pd = PrivateData {
            remote_invalidate: false,
            send_size: RECV_SIZE,
            receive_size: RECV_SIZE,
        };
        Raw::connect_with(s, pd.encode().to_vec()).await
    }

    /// Connects with `private_data` (empty: none at all).
    pub(super) async fn connect_with<P: Provider<Conn = C>>(
        s: &Setup<P>,
        private_data: Vec<u8>,
    ) -> Result<Raw<C>, Failure> {
        let mut recv = None;
        let conn = tokio::time::timeout(
            STEP,
            s.provider.connect_with(
                s.addr,
                ConnectParams::new().private_data(private_data),
                |c| {
                    let r = c.register(vec![0; RECEIVES * RECV_SIZE], Access::LOCAL_WRITE)?;
                    for slot in 0..RECEIVES {
                        c.post_recv(RecvWr::new(
                            1000 + slot as u64,
                            Sge::new(&r, slot * RECV_SIZE..(slot + 1) * RECV_SIZE)?,
                        ))?;
                    }
                    recv = Some(r);
                    Ok(())
                },
            ),
        )
        .await
        .map_err(|_| Failure("the raw connection timed out".into()))?
        .step("raw connect")?;
        let recv = recv.ok_or_else(|| Failure("no receive region".into()))?;
        Ok(Raw {
            conn,
            recv,
            next: 1,
            keep: Vec::new(),
        })
    }

    pub(super) fn send(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let mr = self
            .conn
            .register(bytes.to_vec(), Access::NONE)
            .step("register a message")?;
        self.next += 1;
        self.conn
            .post_send(SendWr::send(self.next, vec![Sge::whole(&mr)]))
            .step("post a message")
    }

    /// The next message the server sends, or [`Answer::Closed`] once the connection is down;
    /// [`Answer::Nothing`] only after the [`STEP`] safety net.
    pub(super) async fn answer(&mut self) -> Answer {
        self.answer_by(Instant::now() + STEP).await
    }

    /// [`Raw::answer`] with the safety net at `deadline`.
    async fn answer_by(&mut self, deadline: Instant) -> Answer {
        loop {
            // Completions first; the connection's state as well, in case a provider reports
            // a closed connection without flushing the receives.
            let c = match tokio::time::timeout(STATE_POLL, self.conn.poll_completion()).await {
                Ok(c) => c,
                Err(_) => match self.conn.try_completion() {
                    Some(c) => c,
                    None if !self.conn.is_connected() => return Answer::Closed,
                    None if Instant::now() >= deadline => return Answer::Nothing,
                    None => continue,
                },
            };
            if c.opcode != WcOpcode::Recv {
                if !c.is_success() {
                    return Answer::Closed;
                }
                continue;
            }
            if c.status != WcStatus::Success {
                return Answer::Closed;
            }
            let slot = (c.wr_id - 1000) as usize;
            let Ok(bytes) = self
                .recv
                .to_vec(slot * RECV_SIZE..slot * RECV_SIZE + c.byte_len as usize)
            else {
                return Answer::Closed;
            };
            if let Ok(sge) = Sge::new(&self.recv, slot * RECV_SIZE..(slot + 1) * RECV_SIZE) {
                let _ = self.conn.post_recv(RecvWr::new(c.wr_id, sge));
            }
            return Answer::Message(bytes);
        }
    }

    /// The next message the server sends, parsed; the failure names `what` was awaited.
    pub(super) async fn reply_to(&mut self, what: &str) -> Result<Header, Failure> {
        parsed(self.answer().await).map_err(|e| Failure(format!("{what}: {e}")))
    }

    /// Shows that the server answered none of the messages sent so far: sends a NULL call
    /// with XID [`SENTINEL`] and requires the next answer to be its reply. The server takes a
    /// connection's messages in order and answers one it refuses at once, when it takes it,
    /// so an answer to an earlier message would come first. `what` names the messages.
    pub(super) async fn nothing_answered(&mut self, what: &str) -> Result<(), Failure> {
        let null = rpc_call(SENTINEL, 0, &[]);
        self.send(&message(SENTINEL, Body::Msg(Chunks::default()), &null))?;
        let h = self
            .reply_to(&format!("the NULL call sent after {what}"))
            .await?;
        ensure!(
            h.xid == SENTINEL && matches!(h.body, Body::Msg(_)),
            "an answer to {what} came before the reply to the NULL call sent after: {h:?}"
        );
        Ok(())
    }
}

pub(super) fn encode(h: &Header) -> Vec<u8> {
    let mut enc = Encoder::new();
    // A header of the suite's own making always encodes.
    let _ = header::encode(h, &mut enc);
    enc.finish().into_bytes().to_vec()
}

/// An RPC call header for the suite's program, procedure `proc`, then `args` words.
pub(super) fn rpc_call(xid: u32, proc: u32, args: &[u32]) -> Vec<u8> {
    let mut v = Vec::new();
    let header = [
        xid,
        0,
        2,
        testprog::PROGRAM,
        testvers::VERSION,
        proc,
        0,
        0,
        0,
        0,
    ];
    for w in header.iter().chain(args) {
        v.extend_from_slice(&w.to_be_bytes());
    }
    v
}

pub(super) fn message(xid: u32, body: Body, rpc: &[u8]) -> Vec<u8> {
    let mut m = encode(&Header::v1(xid, 4, body));
    m.extend_from_slice(rpc);
    m
}

pub(super) fn parsed(a: Answer) -> Result<Header, Failure> {
    match a {
        Answer::Message(m) => header::parse(&m, &Default::default())
            .map(|(h, _)| h)
            .map_err(|e| Failure(format!("an unparsable answer: {e}"))),
        Answer::Closed => Err(Failure(
            "expected an answer, the connection closed instead".into(),
        )),
        Answer::Nothing => Err(Failure(format!(
            "expected an answer, none within the {STEP:?} safety net"
        ))),
    }
}

/// Runs `lie` on a raw connection while a good client calls the same server.
async fn hostile<T, F>(put: &T, lie: F) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
    F: AsyncFnOnce(&mut Raw<<T::P as Provider>::Conn>) -> Result<(), Failure>,
{
    let s = setup_with(put, RdmaConfig::default(), client_config()).await?;
    let good = async |what: &str| -> Result<(), Failure> {
        let data = pattern(100_000, 1);
        let r = s
            .client
            .test_echo(EchoArgs {
                tag: 1,
                data: data.clone(),
            })
            .await
            .step(&format!("the good client's call {what}"))?;
        ensure!(r.data == data, "the good client got other bytes {what}");
        Ok(())
    };
    good("before").await?;
    let mut raw = Raw::connect(&s).await?;
    lie(&mut raw).await?;
    good("after").await
}

pub(super) async fn misaligned_position<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        let body = Body::Msg(Chunks {
            reads: vec![ReadChunk {
                position: 46,
                segments: vec![Segment {
                    rdma_handle: 0x100,
                    rdma_length: 8,
                    rdma_offset: 0,
                }],
            }],
            ..Default::default()
        });
        raw.send(&message(5, body, &rpc_call(5, 1, &[7, 8])))?;
        let h = raw.reply_to("the answer to a misaligned position").await?;
        ensure!(
            (h.xid, &h.body) == (5, &Body::Error(RdmaError::BadXdr)),
            "a misaligned position: {h:?}"
        );
        Ok(())
    })
    .await
}

pub(super) async fn other_version<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        let mut m = message(10, Body::Msg(Chunks::default()), &rpc_call(10, 0, &[]));
        m[4..8].copy_from_slice(&2u32.to_be_bytes());
        raw.send(&m)?;
        let h = raw.reply_to("the answer to version 2").await?;
        ensure!(
            (h.xid, &h.body) == (10, &Body::Error(RdmaError::Vers { low: 1, high: 1 })),
            "version 2: {h:?}"
        );
        Ok(())
    })
    .await
}

pub(super) async fn cut_headers<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        let full = message(9, Body::Msg(Chunks::default()), &rpc_call(9, 0, &[]));
        for cut in [1, 3, 8, 15] {
            // One at a time, each followed by a NULL call: no more messages in flight than
            // the two credits a server on a shared receive queue starts a connection with,
            // which it holds the peer to.
            raw.send(&full[..cut])?;
            raw.nothing_answered(&format!("a header cut to {cut} bytes"))
                .await?;
        }
        raw.send(&full[..20])?;
        let h = raw
            .reply_to("the answer to a header cut in its lists")
            .await?;
        ensure!(
            h.body == Body::Error(RdmaError::BadXdr),
            "a header cut in its lists: {h:?}"
        );
        raw.send(&full)?;
        let h = raw.reply_to("the answer to the whole call").await?;
        ensure!(matches!(h.body, Body::Msg(_)), "the whole call: {h:?}");
        Ok(())
    })
    .await
}

/// An ECHO call `xid` whose inline length word says `count` and whose data is a Read chunk
/// of `chunk_len` bytes at the start of a fresh registration of `region_len` bytes; a 4 KiB
/// Write chunk for the result.
fn echo_from_registration<C: Connection>(
    raw: &mut Raw<C>,
    xid: u32,
    count: u32,
    region_len: usize,
    chunk_len: u32,
) -> Result<(Body, Vec<u8>), Failure> {
    let src = raw
        .conn
        .register(vec![9; region_len], Access::REMOTE_READ)
        .step("register the source")?;
    let rpc = rpc_call(xid, 1, &[7, count]);
    let body = Body::Msg(Chunks {
        reads: vec![ReadChunk {
            position: rpc.len() as u32,
            segments: vec![Segment {
                rdma_handle: src.rkey(),
                rdma_length: chunk_len,
                rdma_offset: src.addr(),
            }],
        }],
        writes: vec![vec![Segment {
            rdma_handle: 0x200,
            rdma_length: 4096,
            rdma_offset: 0,
        }]],
        ..Default::default()
    });
    // The registration must outlive the call: the server reads it after this returns.
    raw.keep.push(src);
    Ok((body, rpc))
}

pub(super) async fn read_chunk_not_adding_up<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        // ECHO: tag 7, then a length of 40,000 whose data is a Read chunk of 16 bytes.
        let (body, rpc) = echo_from_registration(raw, 6, 40_000, 16, 16)?;
        raw.send(&message(6, body, &rpc))?;
        let h = raw
            .reply_to("the answer to a chunk shorter than its count")
            .await?;
        ensure!(
            (h.xid, &h.body) == (6, &Body::Error(RdmaError::BadXdr)),
            "a chunk shorter than its count: {h:?}"
        );
        Ok(())
    })
    .await
}

pub(super) async fn huge_count<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        // RDMA_MSG, no Read list, a Write list whose first chunk claims 2^32 - 1 segments.
        let mut m = Vec::new();
        for w in [7u32, 1, 4, 0, 0, 1, u32::MAX, 1, 2, 3] {
            m.extend_from_slice(&w.to_be_bytes());
        }
        raw.send(&m)?;
        let h = raw.reply_to("the answer to a huge count").await?;
        ensure!(
            (h.xid, &h.body) == (7, &Body::Error(RdmaError::BadXdr)),
            "a huge count: {h:?}"
        );
        Ok(())
    })
    .await
}

/// Waits until the server has closed the raw connection, reading past the messages it sends
/// before; false when it is still up at the [`STEP`] safety net.
pub(super) async fn closed<C: Connection>(raw: &mut Raw<C>) -> bool {
    let deadline = Instant::now() + STEP;
    loop {
        match raw.answer_by(deadline).await {
            Answer::Closed => return true,
            Answer::Nothing => return false,
            Answer::Message(_) => {}
        }
    }
}

pub(super) async fn segment_past_registration<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        // A Read chunk of 4 KiB at the start of a 64-byte registration.
        let (body, rpc) = echo_from_registration(raw, 8, 4096, 64, 4096)?;
        raw.send(&message(8, body, &rpc))?;
        // The RNIC refuses the server's RDMA Read (an iWARP Terminate, an InfiniBand NAK): the
        // connection goes down.
        ensure!(
            closed(raw).await,
            "the connection stayed up past the {STEP:?} safety net"
        );
        Ok(())
    })
    .await
}

pub(super) async fn credit_overrun<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // The server grants 4; the peer sends 6 slow calls before any reply. Those beyond the 4
    // receives the server posted wait for one to be posted again: on InfiniBand a "receiver
    // not ready" retry can take most of a second, so the calls sleep far longer than that.
    let s = setup_with(put, RdmaConfig::default().credits(4), client_config()).await?;
    let mut raw = Raw::connect(&s).await?;
    for xid in 0..6u32 {
        let sent = raw.send(&message(
            100 + xid,
            Body::Msg(Chunks::default()),
            &rpc_call(100 + xid, 6, &[5000]),
        ));
        match sent {
            Ok(()) => {}
            // The server may close the connection at the fifth call before the sixth is
            // posted (seen under load): the outcome the case is after.
            Err(_) if xid >= 4 => break,
            Err(e) => return Err(e),
        }
    }
    ensure!(
        closed(&mut raw).await,
        "the connection stayed up past the {STEP:?} safety net"
    );
    let r = s.client.test_null().await;
    ensure!(r.is_ok(), "the good client after the overrun: {r:?}");
    Ok(())
}

pub(super) async fn nomsg_without_position_zero<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        raw.send(&message(11, Body::NoMsg(Chunks::default()), &[]))?;
        let h = raw
            .reply_to("the answer to RDMA_NOMSG without chunks")
            .await?;
        ensure!(
            (h.xid, &h.body) == (11, &Body::Error(RdmaError::BadXdr)),
            "RDMA_NOMSG without a Position-Zero Read chunk: {h:?}"
        );
        Ok(())
    })
    .await
}

pub(super) async fn done_and_msgp<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        raw.send(&message(12, Body::Done, &[]))?;
        raw.nothing_answered("RDMA_DONE").await?;
        // RDMA_MSGP: align and thresh, then empty lists, then the call.
        let mut m = Vec::new();
        for w in [13u32, 1, 4, 2, 0, 0, 0, 0, 0] {
            m.extend_from_slice(&w.to_be_bytes());
        }
        m.extend(rpc_call(13, 0, &[]));
        raw.send(&m)?;
        let h = raw.reply_to("the answer to RDMA_MSGP").await?;
        ensure!(
            h.xid == 13 && matches!(h.body, Body::Msg(_)),
            "RDMA_MSGP: {h:?}"
        );
        Ok(())
    })
    .await
}

pub(super) async fn reply_fits_nowhere<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        // BIG(10,000): a reply that fits neither the 4 KiB receive buffer nor any chunk.
        raw.send(&message(
            14,
            Body::Msg(Chunks::default()),
            &rpc_call(14, 2, &[10_000]),
        ))?;
        let h = raw.reply_to("the answer to BIG(10,000)").await?;
        ensure!(
            (h.xid, &h.body) == (14, &Body::Error(RdmaError::BadXdr)),
            "a reply without room: {h:?}"
        );
        Ok(())
    })
    .await
}

pub(super) async fn garbage_args<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    hostile(put, async |raw| {
        // ECHO with nothing after the call header.
        raw.send(&message(
            15,
            Body::Msg(Chunks::default()),
            &rpc_call(15, 1, &[]),
        ))?;
        let m = match raw.answer().await {
            Answer::Message(m) => m,
            other => {
                return Err(Failure(format!(
                    "the answer to ECHO without data: {other:?}"
                )))
            }
        };
        let (h, used) = header::parse(&m, &Default::default())
            .map_err(|e| Failure(format!("an unparsable answer: {e}")))?;
        ensure!(matches!(h.body, Body::Msg(_)), "{h:?}");
        let err = crate::rpc::decode_reply::<()>(crate::rpc::Reply {
            message: bytes::Bytes::copy_from_slice(&m[used..]),
            chunks: None,
        })
        .err();
        ensure!(
            matches!(err, Some(crate::rpc::Error::GarbageArgs)),
            "{err:?}"
        );
        Ok(())
    })
    .await
}

pub(super) async fn no_private_data<T>(put: &T) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    // A peer that says nothing about its buffers is assumed to have 1 KiB (seed 004 section
    // 4.3.1): a 2,000-byte reply cannot go inline to it, and it provided no Reply chunk.
    let s = setup_with(put, RdmaConfig::default(), client_config()).await?;
    let mut raw = Raw::connect_with(&s, Vec::new()).await?;
    raw.send(&message(
        16,
        Body::Msg(Chunks::default()),
        &rpc_call(16, 2, &[2000]),
    ))?;
    let h = raw.reply_to("the answer to BIG(2,000)").await?;
    ensure!(
        (h.xid, &h.body) == (16, &Body::Error(RdmaError::BadXdr)),
        "a 2,000-byte reply to a peer without private data: {h:?}"
    );
    // 500 bytes fit.
    raw.send(&message(
        17,
        Body::Msg(Chunks::default()),
        &rpc_call(17, 2, &[500]),
    ))?;
    let h = raw.reply_to("the answer to BIG(500)").await?;
    ensure!(
        h.xid == 17 && matches!(h.body, Body::Msg(_)),
        "a 500-byte reply: {h:?}"
    );
    Ok(())
}
