//! `#[repr(C)]` mirrors of `csrc/oracle.h` and the shims' functions.
#![allow(dead_code)]

/// `oracle_segment`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Segment {
    pub handle: u32,
    pub length: u32,
    pub offset: u64,
}

/// `oracle_read_segment`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ReadSegment {
    pub position: u32,
    pub target: Segment,
}

/// `oracle_v1_msg`.
#[repr(C)]
pub struct V1Msg {
    pub xid: u32,
    pub vers: u32,
    pub credit: u32,
    pub proc_: u32,
    pub align: u32,
    pub thresh: u32,
    pub n_reads: u32,
    pub reads: *const ReadSegment,
    pub n_writes: u32,
    pub write_chunk_lens: *const u32,
    pub write_segments: *const Segment,
    pub has_reply: u32,
    pub reply_len: u32,
    pub reply_segments: *const Segment,
    pub err: u32,
    pub vers_low: u32,
    pub vers_high: u32,
}

/// `oracle_auth`.
#[repr(C)]
pub struct Auth {
    pub flavor: u32,
    pub len: u32,
    pub body: *const u8,
}

/// `oracle_rpc_msg`.
#[repr(C)]
pub struct RpcMsg {
    pub xid: u32,
    pub mtype: u32,
    pub rpcvers: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: Auth,
    pub verf: Auth,
    pub reply_stat: u32,
    pub accept_stat: u32,
    pub reject_stat: u32,
    pub auth_stat: u32,
    pub low: u32,
    pub high: u32,
}

/// `oracle_authsys`.
#[repr(C)]
pub struct AuthSys {
    pub stamp: u32,
    pub machinename_len: u32,
    pub machinename: *const u8,
    pub uid: u32,
    pub gid: u32,
    pub n_gids: u32,
    pub gids: *const u32,
}

/// `oracle_v1_bench` (opaque).
#[repr(C)]
pub struct V1Bench {
    _private: [u8; 0],
}

#[cfg(not(rpcgen_oracle_missing))]
extern "C" {
    pub fn oracle_v1_encode(msg: *const V1Msg, buf: *mut u8, cap: u32, len: *mut u32) -> i32;
    pub fn oracle_v1_reencode(
        input: *const u8,
        in_len: u32,
        out: *mut u8,
        cap: u32,
        out_len: *mut u32,
    ) -> i32;
    pub fn oracle_v1_random(seed: u64, buf: *mut u8, cap: u32, len: *mut u32) -> i32;
    pub fn oracle_v1_bench_new(msg: *const V1Msg) -> *mut V1Bench;
    pub fn oracle_v1_bench_pair(bench: *mut V1Bench, buf: *mut u8, cap: u32, len: *mut u32) -> i32;
    pub fn oracle_v1_bench_pair_reuse(
        bench: *mut V1Bench,
        buf: *mut u8,
        cap: u32,
        len: *mut u32,
    ) -> i32;
    pub fn oracle_v1_bench_run(
        bench: *mut V1Bench,
        buf: *mut u8,
        cap: u32,
        n: u32,
        reuse: i32,
    ) -> i32;
    pub fn oracle_v1_bench_free(bench: *mut V1Bench);

    pub fn oracle_rpc_encode(msg: *const RpcMsg, buf: *mut u8, cap: u32, len: *mut u32) -> i32;
    pub fn oracle_rpc_reencode(
        input: *const u8,
        in_len: u32,
        out: *mut u8,
        cap: u32,
        out_len: *mut u32,
    ) -> i32;
    pub fn oracle_rpc_random(seed: u64, buf: *mut u8, cap: u32, len: *mut u32) -> i32;
    pub fn oracle_authsys_encode(p: *const AuthSys, buf: *mut u8, cap: u32, len: *mut u32) -> i32;
    pub fn oracle_v2_reencode(
        kind: i32,
        input: *const u8,
        in_len: u32,
        out: *mut u8,
        cap: u32,
        out_len: *mut u32,
    ) -> i32;
    pub fn oracle_v2_random(kind: i32, seed: u64, buf: *mut u8, cap: u32, len: *mut u32) -> i32;

    pub fn oracle_authsys_reencode(
        input: *const u8,
        in_len: u32,
        out: *mut u8,
        cap: u32,
        out_len: *mut u32,
    ) -> i32;
}
