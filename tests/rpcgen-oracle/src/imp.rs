//! Safe calls into the C shims.

use crate::{ffi, AuthSys, OracleError, RpcMsg, V1Body, V1Chunks, V1Msg, V2Kind};
use std::ptr::NonNull;

fn check(rc: i32) -> Result<(), OracleError> {
    match rc {
        0 => Ok(()),
        -1 => Err(OracleError::Decode),
        -2 => Err(OracleError::Encode),
        -3 => Err(OracleError::Trailing),
        -4 => Err(OracleError::NoMemory),
        code => Err(OracleError::Other(code)),
    }
}

/// Runs `f(buf, cap, &mut len)` on a zeroed buffer of `cap` bytes, keeps `len` of them.
fn with_buffer(
    cap: usize,
    f: impl FnOnce(*mut u8, u32, *mut u32) -> i32,
) -> Result<Vec<u8>, OracleError> {
    let cap32 = u32::try_from(cap).map_err(|_| OracleError::Encode)?;
    let mut buf = vec![0u8; cap];
    let mut len = 0u32;
    check(f(buf.as_mut_ptr(), cap32, &mut len))?;
    buf.truncate(len as usize);
    Ok(buf)
}

/// Slack for re-encoding: an encoder that wrote more than it read shows as a byte mismatch
/// rather than as an encode failure.
const REENCODE_SLACK: usize = 4096;

fn c_segment(s: &crate::Segment) -> ffi::Segment {
    ffi::Segment {
        handle: s.handle,
        length: s.length,
        offset: s.offset,
    }
}

/// The arrays an `ffi::V1Msg` points into; they must outlive every use of it.
#[derive(Default)]
struct V1Storage {
    reads: Vec<ffi::ReadSegment>,
    lens: Vec<u32>,
    writes: Vec<ffi::Segment>,
    reply: Vec<ffi::Segment>,
}

fn c_v1(msg: &V1Msg, storage: &mut V1Storage) -> Result<ffi::V1Msg, OracleError> {
    let count = |n: usize| u32::try_from(n).map_err(|_| OracleError::Encode);
    let mut c = ffi::V1Msg {
        xid: msg.xid,
        vers: msg.vers,
        credit: msg.credit,
        proc_: 0,
        align: 0,
        thresh: 0,
        n_reads: 0,
        reads: std::ptr::null(),
        n_writes: 0,
        write_chunk_lens: std::ptr::null(),
        write_segments: std::ptr::null(),
        has_reply: 0,
        reply_len: 0,
        reply_segments: std::ptr::null(),
        err: 0,
        vers_low: 0,
        vers_high: 0,
    };
    let chunks: Option<&V1Chunks> = match &msg.body {
        V1Body::Chunks { proc_, chunks } => {
            c.proc_ = *proc_;
            Some(chunks)
        }
        V1Body::Padded {
            align,
            thresh,
            chunks,
        } => {
            c.proc_ = 2;
            c.align = *align;
            c.thresh = *thresh;
            Some(chunks)
        }
        V1Body::Done => {
            c.proc_ = 3;
            None
        }
        V1Body::ErrVers { low, high } => {
            c.proc_ = 4;
            c.err = 1;
            c.vers_low = *low;
            c.vers_high = *high;
            None
        }
        V1Body::ErrChunk => {
            c.proc_ = 4;
            c.err = 2;
            None
        }
    };
    if let Some(chunks) = chunks {
        storage.reads = chunks
            .reads
            .iter()
            .map(|r| ffi::ReadSegment {
                position: r.position,
                target: c_segment(&r.target),
            })
            .collect();
        for w in &chunks.writes {
            storage.lens.push(count(w.len())?);
            storage.writes.extend(w.iter().map(c_segment));
        }
        if let Some(reply) = &chunks.reply {
            c.has_reply = 1;
            c.reply_len = count(reply.len())?;
            storage.reply = reply.iter().map(c_segment).collect();
        }
        c.n_reads = count(storage.reads.len())?;
        c.reads = storage.reads.as_ptr();
        c.n_writes = count(storage.lens.len())?;
        c.write_chunk_lens = storage.lens.as_ptr();
        c.write_segments = storage.writes.as_ptr();
        c.reply_segments = storage.reply.as_ptr();
    }
    Ok(c)
}

fn v1_capacity(storage: &V1Storage) -> usize {
    64 + 32 * (storage.reads.len() + storage.lens.len() + storage.writes.len())
        + 16 * storage.reply.len()
}

/// Encodes `msg` with rpcgen's `xdr_rpcrdma1_msg`.
pub fn v1_encode(msg: &V1Msg) -> Result<Vec<u8>, OracleError> {
    let mut storage = V1Storage::default();
    let c = c_v1(msg, &mut storage)?;
    // SAFETY: `c` points into `storage`, alive for the call; the buffer is `cap` bytes.
    with_buffer(v1_capacity(&storage), |buf, cap, len| unsafe {
        ffi::oracle_v1_encode(&c, buf, cap, len)
    })
}

/// Decodes `bytes` with rpcgen's `xdr_rpcrdma1_msg` (all must be consumed), encodes again.
pub fn v1_reencode(bytes: &[u8]) -> Result<Vec<u8>, OracleError> {
    let in_len = u32::try_from(bytes.len()).map_err(|_| OracleError::Decode)?;
    // SAFETY: input and output buffers are valid for the lengths passed.
    with_buffer(bytes.len() + REENCODE_SLACK, |buf, cap, len| unsafe {
        ffi::oracle_v1_reencode(bytes.as_ptr(), in_len, buf, cap, len)
    })
}

/// Bytes of an `rpcrdma1_msg` the C side draws from `seed` (every arm, 0-4 read segments,
/// 0-3 write chunks of 0-4 segments, an optional reply chunk of 0-4 segments).
pub fn v1_random(seed: u64) -> Result<Vec<u8>, OracleError> {
    // SAFETY: the buffer is `cap` bytes.
    with_buffer(4096, |buf, cap, len| unsafe {
        ffi::oracle_v1_random(seed, buf, cap, len)
    })
}

/// A native rpcgen `rpcrdma1_msg`, built once, for the benchmark.
pub struct V1Bench {
    bench: NonNull<ffi::V1Bench>,
}

impl V1Bench {
    /// Builds rpcgen's structure for `msg`.
    pub fn new(msg: &V1Msg) -> Result<Self, OracleError> {
        let mut storage = V1Storage::default();
        let c = c_v1(msg, &mut storage)?;
        // SAFETY: `c` points into `storage`, alive for the call; the C side copies it all.
        let bench = unsafe { ffi::oracle_v1_bench_new(&c) };
        NonNull::new(bench)
            .map(|bench| V1Bench { bench })
            .ok_or(OracleError::NoMemory)
    }

    /// One benchmark iteration: `xdrmem_create` + `xdr_rpcrdma1_msg` encode into `buf`, then
    /// decode those bytes into a fresh structure and `xdr_free` it. Returns the length.
    pub fn encode_decode(&mut self, buf: &mut [u8]) -> Result<usize, OracleError> {
        let cap = u32::try_from(buf.len()).map_err(|_| OracleError::Encode)?;
        let mut len = 0u32;
        // SAFETY: `self.bench` is live until drop; `buf` is valid for `cap` bytes.
        check(unsafe {
            ffi::oracle_v1_bench_pair(self.bench.as_ptr(), buf.as_mut_ptr(), cap, &mut len)
        })?;
        Ok(len as usize)
    }

    /// The steady-state iteration: encode as [`encode_decode`](Self::encode_decode) does,
    /// then decode into one structure kept across calls. rpcgen's `xdr_reference` and
    /// `xdr_array` reuse the memory a non-NULL pointer holds, so after the first call nothing
    /// is allocated or freed. Returns the length.
    pub fn encode_decode_reuse(&mut self, buf: &mut [u8]) -> Result<usize, OracleError> {
        let cap = u32::try_from(buf.len()).map_err(|_| OracleError::Encode)?;
        let mut len = 0u32;
        // SAFETY: `self.bench` is live until drop; `buf` is valid for `cap` bytes.
        check(unsafe {
            ffi::oracle_v1_bench_pair_reuse(self.bench.as_ptr(), buf.as_mut_ptr(), cap, &mut len)
        })?;
        Ok(len as usize)
    }

    /// `n` iterations in one call, looped in C (no call from Rust per message): the pair
    /// of [`encode_decode`](Self::encode_decode), or with `reuse` the steady-state pair of
    /// [`encode_decode_reuse`](Self::encode_decode_reuse).
    pub fn run(&mut self, buf: &mut [u8], n: u32, reuse: bool) -> Result<(), OracleError> {
        let cap = u32::try_from(buf.len()).map_err(|_| OracleError::Encode)?;
        // SAFETY: `self.bench` is live until drop; `buf` is valid for `cap` bytes.
        check(unsafe {
            ffi::oracle_v1_bench_run(self.bench.as_ptr(), buf.as_mut_ptr(), cap, n, reuse.into())
        })
    }
}

impl Drop for V1Bench {
    fn drop(&mut self) {
        // SAFETY: created by oracle_v1_bench_new, freed once.
        unsafe { ffi::oracle_v1_bench_free(self.bench.as_ptr()) }
    }
}

fn c_auth(a: &crate::Auth) -> Result<ffi::Auth, OracleError> {
    Ok(ffi::Auth {
        flavor: a.flavor,
        len: u32::try_from(a.body.len()).map_err(|_| OracleError::Encode)?,
        body: a.body.as_ptr(),
    })
}

/// Encodes `msg` with rpcgen's `xdr_rpc_msg` (from `specs/rpc_msg.x`).
pub fn rpc_encode(msg: &RpcMsg) -> Result<Vec<u8>, OracleError> {
    let none = crate::Auth::default();
    let (mut cred, mut verf) = (&none, &none);
    let mut c = ffi::RpcMsg {
        xid: 0,
        mtype: 1,
        rpcvers: 0,
        prog: 0,
        vers: 0,
        proc_: 0,
        cred: c_auth(&none)?,
        verf: c_auth(&none)?,
        reply_stat: 0,
        accept_stat: 0,
        reject_stat: 0,
        auth_stat: 0,
        low: 0,
        high: 0,
    };
    match msg {
        RpcMsg::Call {
            xid,
            rpcvers,
            prog,
            vers,
            proc_,
            cred: call_cred,
            verf: call_verf,
        } => {
            c.xid = *xid;
            c.mtype = 0;
            c.rpcvers = *rpcvers;
            c.prog = *prog;
            c.vers = *vers;
            c.proc_ = *proc_;
            cred = call_cred;
            verf = call_verf;
        }
        RpcMsg::Accepted {
            xid,
            verf: reply_verf,
            stat,
            low,
            high,
        } => {
            c.xid = *xid;
            c.reply_stat = 0;
            c.accept_stat = *stat;
            c.low = *low;
            c.high = *high;
            verf = reply_verf;
        }
        RpcMsg::RpcMismatch { xid, low, high } => {
            c.xid = *xid;
            c.reply_stat = 1;
            c.reject_stat = 0;
            c.low = *low;
            c.high = *high;
        }
        RpcMsg::AuthError { xid, stat } => {
            c.xid = *xid;
            c.reply_stat = 1;
            c.reject_stat = 1;
            c.auth_stat = *stat;
        }
    }
    c.cred = c_auth(cred)?;
    c.verf = c_auth(verf)?;
    let cap = 128 + cred.body.len() + verf.body.len();
    // SAFETY: `c` points into `msg`'s bodies, alive for the call.
    with_buffer(cap, |buf, cap, len| unsafe {
        ffi::oracle_rpc_encode(&c, buf, cap, len)
    })
}

/// Decodes `bytes` with rpcgen's `xdr_rpc_msg` (all must be consumed), encodes again.
pub fn rpc_reencode(bytes: &[u8]) -> Result<Vec<u8>, OracleError> {
    let in_len = u32::try_from(bytes.len()).map_err(|_| OracleError::Decode)?;
    // SAFETY: input and output buffers are valid for the lengths passed.
    with_buffer(bytes.len() + REENCODE_SLACK, |buf, cap, len| unsafe {
        ffi::oracle_rpc_reencode(bytes.as_ptr(), in_len, buf, cap, len)
    })
}

/// Bytes of an `rpc_msg` the C side draws from `seed` (calls, every reply arm, credential
/// bodies of 0-400 bytes).
pub fn rpc_random(seed: u64) -> Result<Vec<u8>, OracleError> {
    // SAFETY: the buffer is `cap` bytes.
    with_buffer(4096, |buf, cap, len| unsafe {
        ffi::oracle_rpc_random(seed, buf, cap, len)
    })
}

/// Encodes `p` with rpcgen's `xdr_authsys_parms`.
pub fn authsys_encode(p: &AuthSys) -> Result<Vec<u8>, OracleError> {
    let c = ffi::AuthSys {
        stamp: p.stamp,
        machinename_len: u32::try_from(p.machinename.len()).map_err(|_| OracleError::Encode)?,
        machinename: p.machinename.as_ptr(),
        uid: p.uid,
        gid: p.gid,
        n_gids: u32::try_from(p.gids.len()).map_err(|_| OracleError::Encode)?,
        gids: p.gids.as_ptr(),
    };
    let cap = 64 + p.machinename.len() + 4 * p.gids.len();
    // SAFETY: `c` points into `p`, alive for the call.
    with_buffer(cap, |buf, cap, len| unsafe {
        ffi::oracle_authsys_encode(&c, buf, cap, len)
    })
}

/// Decodes `bytes` with rpcgen's `xdr_authsys_parms` (all must be consumed), encodes again.
pub fn authsys_reencode(bytes: &[u8]) -> Result<Vec<u8>, OracleError> {
    let in_len = u32::try_from(bytes.len()).map_err(|_| OracleError::Decode)?;
    // SAFETY: input and output buffers are valid for the lengths passed.
    with_buffer(bytes.len() + REENCODE_SLACK, |buf, cap, len| unsafe {
        ffi::oracle_authsys_reencode(bytes.as_ptr(), in_len, buf, cap, len)
    })
}

/// Decodes `bytes` as a `kind` with rpcgen's `xdr_*` (all must be consumed), encodes again.
pub fn v2_reencode(kind: V2Kind, bytes: &[u8]) -> Result<Vec<u8>, OracleError> {
    let in_len = u32::try_from(bytes.len()).map_err(|_| OracleError::Decode)?;
    // SAFETY: input and output buffers are valid for the lengths passed.
    with_buffer(bytes.len() + REENCODE_SLACK, |buf, cap, len| unsafe {
        ffi::oracle_v2_reencode(kind as i32, bytes.as_ptr(), in_len, buf, cap, len)
    })
}

/// Bytes of a `kind` the C side draws from `seed` (chunk lists of 0-4 reads, 0-3 write
/// chunks, optional reply chunk; every error arm and the `default` arm; 0-3 properties).
pub fn v2_random(kind: V2Kind, seed: u64) -> Result<Vec<u8>, OracleError> {
    // SAFETY: the buffer is `cap` bytes.
    with_buffer(4096, |buf, cap, len| unsafe {
        ffi::oracle_v2_random(kind as i32, seed, buf, cap, len)
    })
}
