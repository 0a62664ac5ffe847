/*
 * The rpcgen side of the RPC-over-RDMA version 2 oracle (rpcrdma_v2.h, generated from
 * specs/common.x + specs/baseops.x). build.rs renames every generated xdr_* function with
 * -D (xdr_uint32 and xdr_uint64 also exist in the version 1 library).
 */
#include <stdlib.h>
#include <string.h>

#include "oracle.h"
#include "rpcrdma_v2.h"

/* Storage for any of the message types. */
typedef union {
    rpcrdma2_hdr_prefix prefix;
    rpcrdma2_msg msg;
    rpcrdma2_nomsg nomsg;
    rpcrdma2_error error;
    rpcrdma2_connprop connprop;
} any_v2;

static xdrproc_t proc_of(int kind)
{
    switch (kind) {
    case ORACLE_V2_PREFIX:
        return (xdrproc_t)xdr_rpcrdma2_hdr_prefix;
    case ORACLE_V2_MSG:
        return (xdrproc_t)xdr_rpcrdma2_msg;
    case ORACLE_V2_NOMSG:
        return (xdrproc_t)xdr_rpcrdma2_nomsg;
    case ORACLE_V2_ERROR:
        return (xdrproc_t)xdr_rpcrdma2_error;
    case ORACLE_V2_CONNPROP:
        return (xdrproc_t)xdr_rpcrdma2_connprop;
    default:
        return NULL;
    }
}

static int encode_any(xdrproc_t proc, any_v2 *v, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    XDR x;
    bool_t ok;

    xdrmem_create(&x, (char *)buf, cap, XDR_ENCODE);
    ok = proc(&x, v);
    *len = xdr_getpos(&x);
    xdr_destroy(&x);
    return ok ? ORACLE_OK : ORACLE_EENCODE;
}

int oracle_v2_reencode(int kind, const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                       uint32_t *out_len)
{
    xdrproc_t proc = proc_of(kind);
    any_v2 v;
    XDR x;
    int rc;

    if (!proc)
        return ORACLE_EDECODE;
    memset(&v, 0, sizeof v);
    xdrmem_create(&x, (char *)in, in_len, XDR_DECODE);
    if (!proc(&x, &v))
        rc = ORACLE_EDECODE;
    else if (xdr_getpos(&x) != in_len)
        rc = ORACLE_ETRAILING;
    else
        rc = encode_any(proc, &v, out, cap, out_len);
    xdr_destroy(&x);
    xdr_free(proc, (char *)&v);
    return rc;
}

/* Random contents; all storage lives in `st` for the duration of one encode. */
typedef struct {
    rpcrdma2_read_list reads[4];
    rpcrdma2_write_list writes[3];
    rpcrdma2_segment segments[16];
    rpcrdma2_write_chunk reply;
    rpcrdma2_propval props[3];
    char data[3][64];
} storage_v2;

static void random_segment(uint64_t *s, rpcrdma2_segment *seg)
{
    seg->rdma_handle = (uint32_t)oracle_next(s);
    seg->rdma_length = (uint32_t)oracle_next(s);
    seg->rdma_offset = oracle_next(s);
}

static void random_chunks(uint64_t *s, storage_v2 *st, rpcrdma2_chunk_lists *c)
{
    uint32_t i, n, used = 0;

    c->rdma_inv_handle = (uint32_t)oracle_next(s);
    n = (uint32_t)(oracle_next(s) % 5);
    for (i = 0; i < n; i++) {
        st->reads[i].rdma_entry.rdma_position = (uint32_t)oracle_next(s);
        random_segment(s, &st->reads[i].rdma_entry.rdma_target);
        st->reads[i].rdma_next = i + 1 < n ? &st->reads[i + 1] : NULL;
    }
    c->rdma_reads = n ? st->reads : NULL;
    n = (uint32_t)(oracle_next(s) % 4);
    for (i = 0; i < n; i++) {
        uint32_t k, len = (uint32_t)(oracle_next(s) % 4);
        st->writes[i].rdma_entry.rdma_target.rdma_target_len = len;
        st->writes[i].rdma_entry.rdma_target.rdma_target_val = &st->segments[used];
        for (k = 0; k < len; k++)
            random_segment(s, &st->segments[used++]);
        st->writes[i].rdma_next = i + 1 < n ? &st->writes[i + 1] : NULL;
    }
    c->rdma_writes = n ? st->writes : NULL;
    if (oracle_next(s) % 2) {
        uint32_t k, len = (uint32_t)(oracle_next(s) % 4);
        st->reply.rdma_target.rdma_target_len = len;
        st->reply.rdma_target.rdma_target_val = &st->segments[used];
        for (k = 0; k < len; k++)
            random_segment(s, &st->segments[used++]);
        c->rdma_reply = &st->reply;
    } else {
        c->rdma_reply = NULL;
    }
}

/* Error codes: every case of rpcrdma2_error and some taking the `default: void` arm. */
static const uint32_t error_codes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xffffffffu};

int oracle_v2_random(int kind, uint64_t seed, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    xdrproc_t proc = proc_of(kind);
    storage_v2 st;
    any_v2 v;
    uint64_t s = seed * 2 + 1;
    uint32_t i;

    if (!proc)
        return ORACLE_EENCODE;
    memset(&v, 0, sizeof v);
    memset(&st, 0, sizeof st);
    switch (kind) {
    case ORACLE_V2_PREFIX:
        v.prefix.rdma_start.rdma_xid = (uint32_t)oracle_next(&s);
        v.prefix.rdma_start.rdma_vers = (uint32_t)oracle_next(&s);
        v.prefix.rdma_start.rdma_credit = (uint32_t)oracle_next(&s);
        v.prefix.rdma_start.rdma_htype = (uint32_t)oracle_next(&s);
        v.prefix.rdma_flags = (uint32_t)oracle_next(&s);
        break;
    case ORACLE_V2_MSG:
        random_chunks(&s, &st, &v.msg.rdma_chunks);
        v.msg.rdma_rpc_first_word = (uint32_t)oracle_next(&s);
        break;
    case ORACLE_V2_NOMSG:
        random_chunks(&s, &st, &v.nomsg.rdma_chunks);
        break;
    case ORACLE_V2_ERROR:
        v.error.rdma_err = error_codes[oracle_next(&s) % 11];
        switch (v.error.rdma_err) {
        case 1:
            v.error.rpcrdma2_error_u.rdma_vrange.rdma_vers_low = (uint32_t)oracle_next(&s);
            v.error.rpcrdma2_error_u.rdma_vrange.rdma_vers_high = (uint32_t)oracle_next(&s);
            break;
        case 4:
        case 5:
            v.error.rpcrdma2_error_u.rdma_max_chunks = (uint32_t)oracle_next(&s);
            break;
        case 6:
            v.error.rpcrdma2_error_u.rdma_max_segments = (uint32_t)oracle_next(&s);
            break;
        case 7:
            v.error.rpcrdma2_error_u.rdma_writeres.rdma_chunk_index = (uint32_t)oracle_next(&s);
            v.error.rpcrdma2_error_u.rdma_writeres.rdma_length_needed = (uint32_t)oracle_next(&s);
            break;
        case 8:
            v.error.rpcrdma2_error_u.rdma_length_needed = (uint32_t)oracle_next(&s);
            break;
        default:
            break;
        }
        break;
    case ORACLE_V2_CONNPROP:
        v.connprop.rdma_props.rpcrdma2_propset_len = (u_int)(oracle_next(&s) % 4);
        v.connprop.rdma_props.rpcrdma2_propset_val = st.props;
        for (i = 0; i < v.connprop.rdma_props.rpcrdma2_propset_len; i++) {
            uint32_t k, n = (uint32_t)(oracle_next(&s) % 65);
            st.props[i].rdma_which = (uint32_t)oracle_next(&s);
            st.props[i].rdma_data.rdma_data_len = n;
            st.props[i].rdma_data.rdma_data_val = st.data[i];
            for (k = 0; k < n; k++)
                st.data[i][k] = (char)oracle_next(&s);
        }
        break;
    }
    return encode_any(proc, &v, buf, cap, len);
}
