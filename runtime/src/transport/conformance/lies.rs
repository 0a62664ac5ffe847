//! The hostile-peer table: every lie a client can tell an RPC-over-RDMA server, each with the
//! answer the protocol prescribes (RDMA_ERROR with the right code, an RPC reply status, a
//! dropped message, or a closed connection).
//!
//! [`run_lie`] runs one: while a raw connection tells the lie, a well-behaved client of the
//! same server keeps calling (and must see every call succeed), and once the liar is gone the
//! provider's registrations are back where they were (when the harness counts them).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::cases::{client_config, setup_with};
use super::hostile::{closed, message, parsed, rpc_call, Answer, Raw};
use super::program::*;
use crate::rdma::conformance::util::{ensure, Step, STEP};
use crate::rdma::conformance::{Failure, ProviderUnderTest};
use crate::rdma::{Access, Connection, SendWr};
use crate::rpc;
use crate::transport::header::{self, Body, Chunks, RdmaError, ReadChunk, Segment};
use crate::transport::private_data::PrivateData;
use crate::transport::RdmaConfig;
use crate::xdr::Decoder;

/// The answer a lie must get.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// RDMA_ERROR / ERR_CHUNK.
    ErrChunk,
    /// RDMA_ERROR / ERR_VERS naming version 1.
    ErrVers,
    /// Nothing at all.
    Dropped,
    /// The connection closes (the RNIC refuses an access; credits overrun).
    Closed,
    /// An RPC reply whose status satisfies the check.
    Reply(fn(&Result<(), rpc::Error>) -> bool),
}

/// The private data a liar connects with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Introduction {
    /// RFC 8797 private data saying 4 KiB buffers.
    Normal,
    /// None at all.
    Silent,
    /// Eight bytes that are not RFC 8797's format.
    Garbage,
}

/// Memory the liar exposes to the server.
pub(super) trait Forge {
    /// A fresh registration of `len` bytes the server may reach with `access`, as a segment.
    fn region(&mut self, len: usize, access: Access) -> Result<Segment, Failure>;
    /// A registration whose handle is invalidated before the server can use it.
    fn invalidated(&mut self, len: usize) -> Result<Segment, Failure>;
}

impl<C: Connection> Forge for Raw<C> {
    fn region(&mut self, len: usize, access: Access) -> Result<Segment, Failure> {
        let mr = self
            .conn
            .register(vec![0x5a; len], Access::LOCAL_WRITE | access)
            .step("register")?;
        let seg = Segment {
            rdma_handle: mr.rkey(),
            rdma_length: len as u32,
            rdma_offset: mr.addr(),
        };
        self.keep.push(mr);
        Ok(seg)
    }

    fn invalidated(&mut self, len: usize) -> Result<Segment, Failure> {
        let seg = self.region(len, Access::REMOTE_READ | Access::REMOTE_WRITE)?;
        // Posted before the call's Send on the same queue: done before the server reads.
        self.conn
            .post_send(SendWr::local_invalidate(9_999, seg.rdma_handle))
            .step("invalidate")?;
        Ok(seg)
    }
}

/// Builds a lie's messages, registering what it exposes through the [`Forge`].
type Build = fn(&mut dyn Forge) -> Result<Vec<Vec<u8>>, Failure>;

/// One lie.
pub struct Lie {
    /// Its name.
    pub name: &'static str,
    /// How the liar introduces itself.
    pub introduction: Introduction,
    /// The answer it must get.
    pub expect: Expect,
    /// The messages it sends.
    build: Build,
}

const XID: u32 = 0x5e7;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_be_bytes()).collect()
}

fn msg(body: Body, rpc: &[u8]) -> Result<Vec<Vec<u8>>, Failure> {
    Ok(vec![message(XID, body, rpc)])
}

fn reads(position: u32, segments: Vec<Segment>) -> Body {
    Body::Msg(Chunks {
        reads: vec![ReadChunk { position, segments }],
        writes: vec![vec![fake(4096)]],
        ..Default::default()
    })
}

/// A segment the liar never registered.
fn fake(len: u32) -> Segment {
    Segment {
        rdma_handle: 0x0dea_d000,
        rdma_length: len,
        rdma_offset: 0x1000,
    }
}

/// An ECHO call whose data (`count` bytes in the length word) is a Read chunk.
fn echo_call() -> (Vec<u8>, u32) {
    let rpc = rpc_call(XID, 1, &[7, 16]);
    let position = rpc.len() as u32;
    (rpc, position)
}

fn null() -> Vec<u8> {
    rpc_call(XID, 0, &[])
}

fn no_chunks() -> Body {
    Body::Msg(Chunks::default())
}

/// The first `cut` bytes of a header with one Read segment, a Write chunk and a Reply chunk.
fn cut(cut: usize) -> Result<Vec<Vec<u8>>, Failure> {
    let body = Body::Msg(Chunks {
        inv_handle: 0,
        reads: vec![ReadChunk {
            position: 44,
            segments: vec![fake(8)],
        }],
        writes: vec![vec![fake(64)]],
        reply: Some(vec![fake(64)]),
    });
    let m = message(XID, body, &null());
    Ok(vec![m[..cut.min(m.len())].to_vec()])
}

fn served(e: &Result<(), rpc::Error>) -> bool {
    e.is_ok()
}

fn lies() -> Vec<Lie> {
    use Expect::*;
    use Introduction::*;
    let lie = |name, expect, build| Lie {
        name,
        introduction: Normal,
        expect,
        build,
    };
    vec![
        // Versions and message types (seed 004 sections 5.1.2, 5.5, 5.7).
        lie("version 0", ErrVers, |_| {
            let mut m = message(XID, no_chunks(), &null());
            m[4..8].copy_from_slice(&0u32.to_be_bytes());
            Ok(vec![m])
        }),
        lie("version 2", ErrVers, |_| {
            let mut m = message(XID, no_chunks(), &null());
            m[4..8].copy_from_slice(&2u32.to_be_bytes());
            Ok(vec![m])
        }),
        lie("version 2^32-1", ErrVers, |_| {
            let mut m = message(XID, no_chunks(), &null());
            m[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
            Ok(vec![m])
        }),
        lie("message type 5", ErrChunk, |_| {
            Ok(vec![words(&[XID, 1, 4, 5, 0, 0, 0])])
        }),
        lie("message type 2^32-1", ErrChunk, |_| {
            Ok(vec![words(&[XID, 1, 4, u32::MAX, 0, 0, 0])])
        }),
        lie("RDMA_DONE", Dropped, |_| Ok(vec![words(&[XID, 1, 4, 3])])),
        lie("RDMA_ERROR sent to a server", Dropped, |_| {
            Ok(vec![words(&[XID, 1, 4, 4, 2])])
        }),
        lie("RDMA_MSGP with a call", Reply(served), |_| {
            let mut m = words(&[XID, 1, 4, 2, 0, 0, 0, 0, 0]);
            m.extend(null());
            Ok(vec![m])
        }),
        // Headers cut short (seed 004 section 8.3.3: a short message is dropped).
        lie("4 bytes", Dropped, |_| cut(4)),
        lie("15 bytes", Dropped, |_| cut(15)),
        lie("cut in the Read list", ErrChunk, |_| cut(24)),
        lie("cut in the Write list", ErrChunk, |_| cut(48)),
        lie("cut in the Reply chunk", ErrChunk, |_| cut(72)),
        lie("no RPC message after RDMA_MSG", ErrChunk, |_| {
            msg(no_chunks(), &[])
        }),
        lie("an RPC message of 4 bytes", ErrChunk, |_| {
            msg(no_chunks(), &XID.to_be_bytes())
        }),
        // Chunk lists that cannot be right (seed 004 section 4.4; seed 002 section 3).
        lie("a present flag of 2", ErrChunk, |_| {
            Ok(vec![words(&[XID, 1, 4, 0, 2, 0, 0])])
        }),
        lie("2^32-1 Write segments", ErrChunk, |_| {
            Ok(vec![words(&[XID, 1, 4, 0, 0, 1, u32::MAX, 1, 2, 3])])
        }),
        lie("2^32-1 Reply segments", ErrChunk, |_| {
            Ok(vec![words(&[XID, 1, 4, 0, 0, 0, 1, u32::MAX, 1, 2])])
        }),
        lie("65 segments in a Write chunk", ErrChunk, |_| {
            msg(
                Body::Msg(Chunks {
                    writes: vec![vec![fake(8); 65]],
                    ..Default::default()
                }),
                &null(),
            )
        }),
        lie("17 Write chunks", ErrChunk, |_| {
            msg(
                Body::Msg(Chunks {
                    writes: vec![vec![fake(8)]; 17],
                    ..Default::default()
                }),
                &null(),
            )
        }),
        lie("17 Read chunks", ErrChunk, |_| {
            let reads = (1..=17)
                .map(|i| ReadChunk {
                    position: 40 + 4 * i,
                    segments: vec![fake(8)],
                })
                .collect();
            msg(
                Body::Msg(Chunks {
                    reads,
                    ..Default::default()
                }),
                &null(),
            )
        }),
        lie("Read chunks of 80 MiB", ErrChunk, |_| {
            let (rpc, position) = echo_call();
            msg(reads(position, vec![fake(40 << 20), fake(40 << 20)]), &rpc)
        }),
        lie("a misaligned Position", ErrChunk, |_| {
            let (rpc, position) = echo_call();
            msg(reads(position + 2, vec![fake(16)]), &rpc)
        }),
        lie("a Position-Zero chunk in RDMA_MSG", ErrChunk, |_| {
            msg(reads(0, vec![fake(16)]), &null())
        }),
        lie("RDMA_NOMSG without a Position-Zero chunk", ErrChunk, |_| {
            msg(Body::NoMsg(Chunks::default()), &[])
        }),
        lie("a chunk split around another", ErrChunk, |_| {
            let body = Body::Msg(Chunks {
                reads: vec![
                    ReadChunk {
                        position: 44,
                        segments: vec![fake(8)],
                    },
                    ReadChunk {
                        position: 48,
                        segments: vec![fake(8)],
                    },
                ],
                ..Default::default()
            });
            let mut h = header::parse(&message(XID, body, &null()), &Default::default())
                .map(|(h, _)| h)
                .map_err(|e| Failure(e.to_string()))?;
            if let Body::Msg(c) = &mut h.body {
                c.reads.push(ReadChunk {
                    position: 44,
                    segments: vec![fake(8)],
                });
            }
            let mut m = super::hostile::encode(&h);
            m.extend(null());
            Ok(vec![m])
        }),
        lie("a segment that wraps the address space", ErrChunk, |_| {
            let seg = Segment {
                rdma_handle: 1,
                rdma_length: 64,
                rdma_offset: u64::MAX - 8,
            };
            msg(
                Body::Msg(Chunks {
                    writes: vec![vec![seg]],
                    ..Default::default()
                }),
                &null(),
            )
        }),
        // Read chunks that do not match the message (seed 004 section 4.4.3.1).
        lie("a Read chunk shorter than its count", ErrChunk, |f| {
            let rpc = rpc_call(XID, 1, &[7, 4000]);
            let seg = f.region(16, Access::REMOTE_READ)?;
            msg(reads(rpc.len() as u32, vec![seg]), &rpc)
        }),
        lie("a Read chunk longer than its count", ErrChunk, |f| {
            let rpc = rpc_call(XID, 1, &[7, 16]);
            let seg = f.region(64, Access::REMOTE_READ)?;
            msg(reads(rpc.len() as u32, vec![seg]), &rpc)
        }),
        lie("a Read chunk past the message's end", ErrChunk, |f| {
            let rpc = rpc_call(XID, 0, &[]);
            let seg = f.region(16, Access::REMOTE_READ)?;
            msg(reads(rpc.len() as u32 + 64, vec![seg]), &rpc)
        }),
        lie(
            "a Read chunk on an item that is not DDP-eligible",
            Reply(|r| matches!(r, Err(rpc::Error::GarbageArgs))),
            |f| {
                // BIG takes an unsigned int, which never comes from a chunk: the argument is
                // missing from the message (seed 004 section 5.5 allows GARBAGE_ARGS here).
                let rpc = rpc_call(XID, 2, &[]);
                let seg = f.region(4, Access::REMOTE_READ)?;
                msg(reads(rpc.len() as u32, vec![seg]), &rpc)
            },
        ),
        lie("overlapping Read segments", Reply(served), |f| {
            // Both segments name the same 8 bytes: legal, if odd; the 16-byte echo comes back
            // inline (no Write chunk provided).
            let (rpc, position) = echo_call();
            let seg = f.region(8, Access::REMOTE_READ)?;
            let body = Body::Msg(Chunks {
                reads: vec![ReadChunk {
                    position,
                    segments: vec![seg, seg],
                }],
                ..Default::default()
            });
            msg(body, &rpc)
        }),
        // Memory the server cannot reach (RFC 5040 section 7: the RNIC refuses it).
        lie("a Read segment past its registration", Closed, |f| {
            let (rpc, position) = echo_call();
            let mut seg = f.region(8, Access::REMOTE_READ)?;
            seg.rdma_length = 16;
            msg(reads(position, vec![seg]), &rpc)
        }),
        lie("a Read segment before its registration", Closed, |f| {
            let (rpc, position) = echo_call();
            let mut seg = f.region(64, Access::REMOTE_READ)?;
            seg.rdma_offset = seg.rdma_offset.wrapping_sub(16);
            msg(reads(position, vec![seg]), &rpc)
        }),
        lie("a Read from an unknown handle", Closed, |_| {
            let (rpc, position) = echo_call();
            msg(reads(position, vec![fake(16)]), &rpc)
        }),
        lie("a Read from an invalidated handle", Closed, |f| {
            let (rpc, position) = echo_call();
            let seg = f.invalidated(16)?;
            msg(reads(position, vec![seg]), &rpc)
        }),
        lie("a Read without the remote read right", Closed, |f| {
            let (rpc, position) = echo_call();
            let seg = f.region(16, Access::REMOTE_WRITE)?;
            msg(reads(position, vec![seg]), &rpc)
        }),
        lie("a Write chunk too small for the result", ErrChunk, |f| {
            // FILL of 3,000 bytes into a 1,000-byte Write chunk.
            let seg = f.region(1000, Access::REMOTE_WRITE)?;
            let body = Body::Msg(Chunks {
                writes: vec![vec![seg]],
                ..Default::default()
            });
            msg(body, &rpc_call(XID, 8, &[3000]))
        }),
        lie("a Write chunk with an unknown handle", Closed, |_| {
            let body = Body::Msg(Chunks {
                writes: vec![vec![fake(4096)]],
                ..Default::default()
            });
            msg(body, &rpc_call(XID, 8, &[3000]))
        }),
        lie(
            "a Write chunk without the remote write right",
            Closed,
            |f| {
                let seg = f.region(4096, Access::REMOTE_READ)?;
                let body = Body::Msg(Chunks {
                    writes: vec![vec![seg]],
                    ..Default::default()
                });
                msg(body, &rpc_call(XID, 8, &[3000]))
            },
        ),
        lie("a Write chunk with an invalidated handle", Closed, |f| {
            let seg = f.invalidated(4096)?;
            let body = Body::Msg(Chunks {
                writes: vec![vec![seg]],
                ..Default::default()
            });
            msg(body, &rpc_call(XID, 8, &[3000]))
        }),
        lie("a Reply chunk too small", ErrChunk, |f| {
            let seg = f.region(1024, Access::REMOTE_WRITE)?;
            let body = Body::Msg(Chunks {
                reply: Some(vec![seg]),
                ..Default::default()
            });
            msg(body, &rpc_call(XID, 2, &[10_000]))
        }),
        lie("a Reply chunk with an unknown handle", Closed, |_| {
            let body = Body::Msg(Chunks {
                reply: Some(vec![fake(16_384)]),
                ..Default::default()
            });
            msg(body, &rpc_call(XID, 2, &[10_000]))
        }),
        lie("a reply that fits nowhere", ErrChunk, |_| {
            msg(no_chunks(), &rpc_call(XID, 2, &[10_000]))
        }),
        // The RPC message itself (RFC 5531 section 9).
        lie(
            "arguments that do not decode",
            Reply(|r| matches!(r, Err(rpc::Error::GarbageArgs))),
            |_| msg(no_chunks(), &rpc_call(XID, 1, &[])),
        ),
        lie(
            "RPC version 3",
            Reply(|r| matches!(r, Err(rpc::Error::RpcMismatch { low: 2, high: 2 }))),
            |_| {
                let mut rpc = null();
                rpc[8..12].copy_from_slice(&3u32.to_be_bytes());
                msg(no_chunks(), &rpc)
            },
        ),
        lie(
            "an unknown program",
            Reply(|r| matches!(r, Err(rpc::Error::ProgUnavail))),
            |_| {
                let mut rpc = null();
                rpc[12..16].copy_from_slice(&0x2000_0999u32.to_be_bytes());
                msg(no_chunks(), &rpc)
            },
        ),
        lie(
            "an unknown version",
            Reply(|r| matches!(r, Err(rpc::Error::ProgMismatch { .. }))),
            |_| {
                let mut rpc = null();
                rpc[16..20].copy_from_slice(&9u32.to_be_bytes());
                msg(no_chunks(), &rpc)
            },
        ),
        lie(
            "an unknown procedure",
            Reply(|r| matches!(r, Err(rpc::Error::ProcUnavail))),
            |_| {
                let mut rpc = null();
                rpc[20..24].copy_from_slice(&77u32.to_be_bytes());
                msg(no_chunks(), &rpc)
            },
        ),
        lie(
            "an unknown credential flavor",
            Reply(|r| matches!(r, Err(rpc::Error::Auth(_)))),
            |_| {
                let mut rpc = null();
                rpc[24..28].copy_from_slice(&0x4242u32.to_be_bytes());
                msg(no_chunks(), &rpc)
            },
        ),
        lie("an RPC REPLY sent to a server", Dropped, |_| {
            msg(no_chunks(), &words(&[XID, 1, 0, 0, 0, 0]))
        }),
        lie("an RPC message type 7", Dropped, |_| {
            // Not a call: taken as a reply, for which a server without a backward direction
            // has no call waiting.
            msg(no_chunks(), &words(&[XID, 7, 2, 0, 0, 0, 0, 0, 0, 0]))
        }),
        // Flow control and buffers.
        lie("a Send larger than the receive buffer", Closed, |_| {
            let mut m = message(XID, no_chunks(), &rpc_call(XID, 3, &[8000]));
            m.extend(vec![0; 8000]);
            Ok(vec![m])
        }),
        Lie {
            name: "no private data, a 2,000-byte reply",
            introduction: Silent,
            expect: ErrChunk,
            build: |_| msg(no_chunks(), &rpc_call(XID, 2, &[2000])),
        },
        Lie {
            name: "private data in another format, a 2,000-byte reply",
            introduction: Garbage,
            expect: ErrChunk,
            build: |_| msg(no_chunks(), &rpc_call(XID, 2, &[2000])),
        },
    ]
}

/// How many lies there are.
pub fn count() -> usize {
    lies().len()
}

/// The names of the lies, in order (for reports).
pub fn names() -> Vec<&'static str> {
    lies().iter().map(|l| l.name).collect()
}

/// Tells lie number `index` to a server on `put` and checks the answer, while a good client
/// keeps being served and without leaking registrations.
pub async fn run_lie<T>(put: &T, index: usize) -> Result<(), Failure>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let all = lies();
    let lie = all
        .get(index)
        .ok_or_else(|| Failure(format!("no lie {index}")))?;
    let what = lie.name;
    // Everything this case makes (server, good client, liar) must be gone at the end.
    let baseline = put.live_registrations();
    let s = setup_with(put, RdmaConfig::default(), client_config()).await?;
    s.client
        .test_null()
        .await
        .step("the good client's first call")?;

    // The good client keeps calling while the lie is told.
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let good = {
        let (client, stop, served) = (s.client.clone(), stop.clone(), served.clone());
        tokio::spawn(async move {
            let data = pattern_of(20_000, 3);
            while !stop.load(Ordering::Relaxed) {
                let r = client
                    .test_echo(EchoArgs {
                        tag: 9,
                        data: data.clone(),
                    })
                    .await
                    .map_err(|e| Failure(format!("the good client's call failed: {e}")))?;
                ensure!(r.data == data, "the good client got other bytes");
                served.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), Failure>(())
        })
    };

    let introduction = match lie.introduction {
        Introduction::Normal => PrivateData {
            remote_invalidate: false,
            send_size: 4096,
            receive_size: 4096,
        }
        .encode()
        .to_vec(),
        Introduction::Silent => Vec::new(),
        Introduction::Garbage => vec![0, b'l', b'i', b'a', b'r', 0, 1, 2],
    };
    let mut raw = Raw::connect_with(&s, introduction).await?;
    let messages = (lie.build)(&mut raw)?;
    for m in &messages {
        raw.send(m)?;
    }
    match lie.expect {
        Expect::ErrChunk | Expect::ErrVers => {
            let h = parsed(raw.answer().await).map_err(|e| Failure(format!("{what}: {e}")))?;
            let want = if matches!(lie.expect, Expect::ErrChunk) {
                Body::Error(RdmaError::BadXdr)
            } else {
                Body::Error(RdmaError::Vers { low: 1, high: 1 })
            };
            ensure!(h.body == want, "{what}: answered {:?}", h.body);
        }
        Expect::Dropped => raw.nothing_answered(what).await?,
        Expect::Closed => {
            ensure!(
                closed(&mut raw).await,
                "{what}: the connection stayed up past the safety net"
            );
        }
        Expect::Reply(check) => {
            let m = match raw.answer().await {
                Answer::Message(m) => m,
                other => return Err(Failure(format!("{what}: no RPC reply: {other:?}"))),
            };
            let (h, used) = header::parse(&m, &Default::default())
                .map_err(|e| Failure(format!("{what}: an unparsable answer: {e}")))?;
            ensure!(
                matches!(h.body, Body::Msg(_)),
                "{what}: answered {:?}",
                h.body
            );
            let message = Bytes::copy_from_slice(&m[used..]);
            let status = rpc::decode_reply_header(&mut Decoder::new(&message)).map(|_| ());
            ensure!(check(&status), "{what}: the RPC reply said {status:?}");
        }
    }

    // The good client was served all along, and still is: at least one of its calls completes
    // after the lie was answered.
    // Polled until it happens; the safety net only keeps a broken server from hanging.
    let after = served.load(Ordering::Relaxed);
    let deadline = Instant::now() + STEP;
    while served.load(Ordering::Relaxed) <= after
        && !good.is_finished()
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    good.await
        .map_err(|e| Failure(format!("the good client panicked: {e}")))??;
    ensure!(
        served.load(Ordering::Relaxed) > after,
        "{what}: no call of the good client completed after the lie was answered, within the \
         {STEP:?} safety net"
    );

    // The liar and the good client are gone: nothing of theirs stays registered, at either
    // end.
    drop(raw);
    drop(s);
    if let Some(before) = baseline {
        let mut now = put.live_registrations().unwrap_or(before);
        let deadline = Instant::now() + STEP;
        while now > before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            now = put.live_registrations().unwrap_or(before);
        }
        ensure!(
            now <= before,
            "{what}: {} registrations left behind after the {STEP:?} safety net",
            now - before
        );
    }
    Ok(())
}

/// Runs every lie against `put`; the failures, named.
pub async fn run_all_lies<T>(put: &T) -> Vec<(usize, &'static str, Failure)>
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let mut failed = Vec::new();
    for (i, name) in names().into_iter().enumerate() {
        if let Err(e) = run_lie(put, i).await {
            failed.push((i, name, e));
        }
    }
    failed
}
