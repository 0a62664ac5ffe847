/*
 * Flat descriptions of XDR values, shared by the Rust tests (as #[repr(C)] mirrors in
 * src/ffi.rs) and the C shims that turn them into rpcgen's structures and back into bytes.
 * Every function returns ORACLE_OK or a negative ORACLE_E* code; none keeps a pointer.
 */
#ifndef ORACLE_H
#define ORACLE_H

#include <stdint.h>

#define ORACLE_OK 0
#define ORACLE_EDECODE (-1)   /* rpcgen's xdr_* decode returned FALSE */
#define ORACLE_EENCODE (-2)   /* encode returned FALSE (buffer too small, bad value) */
#define ORACLE_ETRAILING (-3) /* decode succeeded but left bytes unread */
#define ORACLE_ENOMEM (-4)

/* ---- RPC-over-RDMA version 1 (specs/rpcrdma-v1.x) ---- */

typedef struct {
    uint32_t handle;
    uint32_t length;
    uint64_t offset;
} oracle_segment;

typedef struct {
    uint32_t position;
    oracle_segment target;
} oracle_read_segment;

/* rpcrdma1_msg. The chunk fields are used for RDMA_MSG, RDMA_NOMSG and RDMA_MSGP,
 * align/thresh for RDMA_MSGP, err/vers_low/vers_high for RDMA_ERROR. */
typedef struct {
    uint32_t xid, vers, credit, proc;
    uint32_t align, thresh;
    uint32_t n_reads;
    const oracle_read_segment *reads;
    uint32_t n_writes;
    const uint32_t *write_chunk_lens;     /* n_writes segment counts */
    const oracle_segment *write_segments; /* all write chunks' segments, concatenated */
    uint32_t has_reply;
    uint32_t reply_len;
    const oracle_segment *reply_segments;
    uint32_t err, vers_low, vers_high;
} oracle_v1_msg;

int oracle_v1_encode(const oracle_v1_msg *msg, uint8_t *buf, uint32_t cap, uint32_t *len);
int oracle_v1_reencode(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                       uint32_t *out_len);
int oracle_v1_random(uint64_t seed, uint8_t *buf, uint32_t cap, uint32_t *len);

/* Benchmark: a native rpcgen value built once, then encode + decode + xdr_free per call. */
typedef struct oracle_v1_bench oracle_v1_bench;
oracle_v1_bench *oracle_v1_bench_new(const oracle_v1_msg *msg);
int oracle_v1_bench_pair(oracle_v1_bench *bench, uint8_t *buf, uint32_t cap, uint32_t *len);
int oracle_v1_bench_pair_reuse(oracle_v1_bench *bench, uint8_t *buf, uint32_t cap, uint32_t *len);
/* n pairs in a row (reuse: the steady-state pair), stopping at the first error. */
int oracle_v1_bench_run(oracle_v1_bench *bench, uint8_t *buf, uint32_t cap, uint32_t n, int reuse);
void oracle_v1_bench_free(oracle_v1_bench *bench);

/* ---- ONC RPC messages (specs/rpc_msg.x) ---- */

typedef struct {
    uint32_t flavor;
    uint32_t len;
    const uint8_t *body;
} oracle_auth;

/* rpc_msg. CALL: rpcvers..verf. REPLY: reply_stat; MSG_ACCEPTED: verf, accept_stat and
 * low/high for PROG_MISMATCH; MSG_DENIED: reject_stat, low/high for RPC_MISMATCH,
 * auth_stat for AUTH_ERROR. */
typedef struct {
    uint32_t xid, mtype;
    uint32_t rpcvers, prog, vers, proc;
    oracle_auth cred, verf;
    uint32_t reply_stat, accept_stat, reject_stat, auth_stat;
    uint32_t low, high;
} oracle_rpc_msg;

typedef struct {
    uint32_t stamp;
    uint32_t machinename_len;
    const uint8_t *machinename;
    uint32_t uid, gid;
    uint32_t n_gids;
    const uint32_t *gids;
} oracle_authsys;

int oracle_rpc_encode(const oracle_rpc_msg *msg, uint8_t *buf, uint32_t cap, uint32_t *len);
int oracle_rpc_reencode(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                        uint32_t *out_len);
int oracle_rpc_random(uint64_t seed, uint8_t *buf, uint32_t cap, uint32_t *len);
int oracle_authsys_encode(const oracle_authsys *p, uint8_t *buf, uint32_t cap, uint32_t *len);
int oracle_authsys_reencode(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                            uint32_t *out_len);

/* ---- RPC-over-RDMA version 2 (specs/common.x + specs/baseops.x) ---- */

/* Which message type: rpcrdma2_hdr_prefix, rpcrdma2_msg, rpcrdma2_nomsg, rpcrdma2_error,
 * rpcrdma2_connprop. */
#define ORACLE_V2_PREFIX 0
#define ORACLE_V2_MSG 1
#define ORACLE_V2_NOMSG 2
#define ORACLE_V2_ERROR 3
#define ORACLE_V2_CONNPROP 4

int oracle_v2_reencode(int kind, const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                       uint32_t *out_len);
int oracle_v2_random(int kind, uint64_t seed, uint8_t *buf, uint32_t cap, uint32_t *len);

/* xorshift64* shared by the random generators. */
static inline uint64_t oracle_next(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

#endif
