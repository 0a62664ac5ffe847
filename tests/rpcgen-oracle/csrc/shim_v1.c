/*
 * The rpcgen side of the RPC-over-RDMA version 1 oracle: flat descriptions (oracle.h) to
 * rpcgen's structures (rpcrdma_v1.h, generated from specs/rpcrdma-v1.x) and bytes, with
 * libtirpc's xdrmem streams.
 */
#include <stdlib.h>
#include <string.h>

#include "oracle.h"
#include "rpcrdma_v1.h"

/* An rpcrdma1_msg and the storage its lists and arrays point into. */
typedef struct {
    rpcrdma1_msg msg;
    rpcrdma1_read_list *reads;
    rpcrdma1_write_list *writes;
    rpcrdma1_segment *segments;
    rpcrdma1_write_chunk reply;
} native_v1;

static void native_v1_free(native_v1 *n)
{
    free(n->reads);
    free(n->writes);
    free(n->segments);
    memset(n, 0, sizeof *n);
}

static void copy_segment(rpcrdma1_segment *to, const oracle_segment *from)
{
    to->rdma_handle = from->handle;
    to->rdma_length = from->length;
    to->rdma_offset = from->offset;
}

static int build_chunks(const oracle_v1_msg *in, native_v1 *n, rpcrdma1_chunks *c)
{
    uint32_t i, total = in->has_reply ? in->reply_len : 0;
    rpcrdma1_segment *next_segment;

    memset(c, 0, sizeof *c);
    for (i = 0; i < in->n_writes; i++)
        total += in->write_chunk_lens[i];
    if (in->n_reads && !(n->reads = calloc(in->n_reads, sizeof *n->reads)))
        return ORACLE_ENOMEM;
    if (in->n_writes && !(n->writes = calloc(in->n_writes, sizeof *n->writes)))
        return ORACLE_ENOMEM;
    if (total && !(n->segments = calloc(total, sizeof *n->segments)))
        return ORACLE_ENOMEM;

    for (i = 0; i < in->n_reads; i++) {
        n->reads[i].rdma_entry.rdma_position = in->reads[i].position;
        copy_segment(&n->reads[i].rdma_entry.rdma_target, &in->reads[i].target);
        n->reads[i].rdma_next = i + 1 < in->n_reads ? &n->reads[i + 1] : NULL;
    }
    c->rdma_reads = in->n_reads ? n->reads : NULL;

    next_segment = n->segments;
    const oracle_segment *from = in->write_segments;
    for (i = 0; i < in->n_writes; i++) {
        uint32_t k, len = in->write_chunk_lens[i];
        n->writes[i].rdma_entry.rdma_target.rdma_target_len = len;
        n->writes[i].rdma_entry.rdma_target.rdma_target_val = next_segment;
        for (k = 0; k < len; k++)
            copy_segment(next_segment++, from++);
        n->writes[i].rdma_next = i + 1 < in->n_writes ? &n->writes[i + 1] : NULL;
    }
    c->rdma_writes = in->n_writes ? n->writes : NULL;

    if (in->has_reply) {
        uint32_t k;
        n->reply.rdma_target.rdma_target_len = in->reply_len;
        n->reply.rdma_target.rdma_target_val = next_segment;
        for (k = 0; k < in->reply_len; k++)
            copy_segment(next_segment++, &in->reply_segments[k]);
        c->rdma_reply = &n->reply;
    }
    return ORACLE_OK;
}

static int build_v1(const oracle_v1_msg *in, native_v1 *n)
{
    rpcrdma1_body *body = &n->msg.rdma_body;

    memset(n, 0, sizeof *n);
    n->msg.rdma_xid = in->xid;
    n->msg.rdma_vers = in->vers;
    n->msg.rdma_credit = in->credit;
    body->proc = (rpcrdma1_proc)in->proc;
    switch (in->proc) {
    case RDMA_MSG:
    case RDMA_NOMSG:
        return build_chunks(in, n, &body->rpcrdma1_body_u.rdma_chunks);
    case RDMA_MSGP:
        body->rpcrdma1_body_u.rdma_padded.rdma_align = in->align;
        body->rpcrdma1_body_u.rdma_padded.rdma_thresh = in->thresh;
        return build_chunks(in, n, &body->rpcrdma1_body_u.rdma_padded.rdma_achunks);
    case RDMA_ERROR:
        body->rpcrdma1_body_u.rdma_error.err = (rpcrdma1_errcode)in->err;
        body->rpcrdma1_body_u.rdma_error.rpcrdma1_error_u.rdma_vrange.rdma_vers_low =
            in->vers_low;
        body->rpcrdma1_body_u.rdma_error.rpcrdma1_error_u.rdma_vrange.rdma_vers_high =
            in->vers_high;
        return ORACLE_OK;
    default: /* RDMA_DONE and unknown procedures: no body (the encoder decides) */
        return ORACLE_OK;
    }
}

static int encode_native(rpcrdma1_msg *msg, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    XDR x;
    bool_t ok;

    xdrmem_create(&x, (char *)buf, cap, XDR_ENCODE);
    ok = xdr_rpcrdma1_msg(&x, msg);
    *len = xdr_getpos(&x);
    xdr_destroy(&x);
    return ok ? ORACLE_OK : ORACLE_EENCODE;
}

int oracle_v1_encode(const oracle_v1_msg *msg, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    native_v1 n;
    int rc = build_v1(msg, &n);

    if (rc == ORACLE_OK)
        rc = encode_native(&n.msg, buf, cap, len);
    native_v1_free(&n);
    return rc;
}

int oracle_v1_reencode(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                       uint32_t *out_len)
{
    rpcrdma1_msg msg;
    XDR x;
    int rc;

    memset(&msg, 0, sizeof msg);
    xdrmem_create(&x, (char *)in, in_len, XDR_DECODE);
    if (!xdr_rpcrdma1_msg(&x, &msg))
        rc = ORACLE_EDECODE;
    else if (xdr_getpos(&x) != in_len)
        rc = ORACLE_ETRAILING;
    else
        rc = encode_native(&msg, out, cap, out_len);
    xdr_destroy(&x);
    xdr_free((xdrproc_t)xdr_rpcrdma1_msg, (char *)&msg);
    return rc;
}

static void random_segment(uint64_t *s, oracle_segment *seg)
{
    seg->handle = (uint32_t)oracle_next(s);
    seg->length = (uint32_t)oracle_next(s);
    seg->offset = oracle_next(s);
}

int oracle_v1_random(uint64_t seed, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    oracle_read_segment reads[4];
    uint32_t lens[3];
    oracle_segment writes[12], reply[4];
    oracle_v1_msg m;
    uint64_t s = seed * 2 + 1;
    uint32_t i, total = 0;

    memset(&m, 0, sizeof m);
    m.xid = (uint32_t)oracle_next(&s);
    m.vers = (uint32_t)oracle_next(&s);
    m.credit = (uint32_t)oracle_next(&s);
    m.proc = (uint32_t)(oracle_next(&s) % 5);
    m.align = (uint32_t)oracle_next(&s);
    m.thresh = (uint32_t)oracle_next(&s);
    m.n_reads = (uint32_t)(oracle_next(&s) % 5);
    for (i = 0; i < m.n_reads; i++) {
        reads[i].position = (uint32_t)oracle_next(&s);
        random_segment(&s, &reads[i].target);
    }
    m.reads = reads;
    m.n_writes = (uint32_t)(oracle_next(&s) % 4);
    for (i = 0; i < m.n_writes; i++) {
        uint32_t k;
        lens[i] = (uint32_t)(oracle_next(&s) % 5);
        for (k = 0; k < lens[i]; k++)
            random_segment(&s, &writes[total++]);
    }
    m.write_chunk_lens = lens;
    m.write_segments = writes;
    m.has_reply = (uint32_t)(oracle_next(&s) % 2);
    m.reply_len = (uint32_t)(oracle_next(&s) % 5);
    for (i = 0; i < m.reply_len; i++)
        random_segment(&s, &reply[i]);
    m.reply_segments = reply;
    m.err = RDMA_ERR_VERS + (uint32_t)(oracle_next(&s) % 2);
    m.vers_low = (uint32_t)oracle_next(&s);
    m.vers_high = (uint32_t)oracle_next(&s);
    return oracle_v1_encode(&m, buf, cap, len);
}

struct oracle_v1_bench {
    native_v1 n;
    /* The steady-state pair decodes into this, again and again: rpcgen's xdr_reference and
       xdr_array reuse memory a non-NULL pointer already holds, so once the first decode has
       allocated, later decodes of the same shape allocate nothing (and nothing is freed). */
    rpcrdma1_msg held;
};

oracle_v1_bench *oracle_v1_bench_new(const oracle_v1_msg *msg)
{
    oracle_v1_bench *b = calloc(1, sizeof *b);

    if (b && build_v1(msg, &b->n) != ORACLE_OK) {
        native_v1_free(&b->n);
        free(b);
        return NULL;
    }
    return b;
}

int oracle_v1_bench_pair(oracle_v1_bench *b, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    rpcrdma1_msg decoded;
    XDR x;
    int rc = encode_native(&b->n.msg, buf, cap, len);

    if (rc != ORACLE_OK)
        return rc;
    memset(&decoded, 0, sizeof decoded);
    xdrmem_create(&x, (char *)buf, *len, XDR_DECODE);
    rc = xdr_rpcrdma1_msg(&x, &decoded) ? ORACLE_OK : ORACLE_EDECODE;
    xdr_destroy(&x);
    xdr_free((xdrproc_t)xdr_rpcrdma1_msg, (char *)&decoded);
    return rc;
}

int oracle_v1_bench_pair_reuse(oracle_v1_bench *b, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    XDR x;
    int rc = encode_native(&b->n.msg, buf, cap, len);

    if (rc != ORACLE_OK)
        return rc;
    xdrmem_create(&x, (char *)buf, *len, XDR_DECODE);
    rc = xdr_rpcrdma1_msg(&x, &b->held) ? ORACLE_OK : ORACLE_EDECODE;
    xdr_destroy(&x);
    return rc;
}

int oracle_v1_bench_run(oracle_v1_bench *b, uint8_t *buf, uint32_t cap, uint32_t n, int reuse)
{
    uint32_t i, len;
    int rc;

    /* The timed loop itself runs here, in C: no call from Rust per message. */
    for (i = 0; i < n; i++) {
        rc = reuse ? oracle_v1_bench_pair_reuse(b, buf, cap, &len)
                   : oracle_v1_bench_pair(b, buf, cap, &len);
        if (rc != ORACLE_OK)
            return rc;
    }
    return ORACLE_OK;
}

void oracle_v1_bench_free(oracle_v1_bench *b)
{
    if (b) {
        xdr_free((xdrproc_t)xdr_rpcrdma1_msg, (char *)&b->held);
        native_v1_free(&b->n);
        free(b);
    }
}
