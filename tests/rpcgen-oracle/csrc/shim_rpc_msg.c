/*
 * The rpcgen side of the ONC RPC message oracle (rpc_msg.h, generated from
 * specs/rpc_msg.x). This translation unit sees a shadow <rpc/rpc.h> holding only the XDR
 * primitives, and build.rs renames every generated xdr_* function with -D, so neither the
 * types nor the symbols clash with libtirpc's own rpc_msg / opaque_auth.
 */
#include <stdlib.h>
#include <string.h>

#include "oracle.h"
#include "rpc_msg.h"

static void set_auth(opaque_auth *to, const oracle_auth *from)
{
    to->flavor = (auth_flavor)from->flavor;
    to->body.body_len = from->len;
    to->body.body_val = (char *)from->body; /* only read by the encoder */
}

static void build_rpc(const oracle_rpc_msg *in, rpc_msg *m)
{
    memset(m, 0, sizeof *m);
    m->xid = in->xid;
    m->body.mtype = (msg_type)in->mtype;
    if (in->mtype == CALL) {
        call_body *c = &m->body.rpc_msg_body_u.cbody;
        c->rpcvers = in->rpcvers;
        c->prog = in->prog;
        c->vers = in->vers;
        c->proc = in->proc;
        set_auth(&c->cred, &in->cred);
        set_auth(&c->verf, &in->verf);
        return;
    }
    reply_body *r = &m->body.rpc_msg_body_u.rbody;
    r->stat = (reply_stat)in->reply_stat;
    if (in->reply_stat == MSG_ACCEPTED) {
        accepted_reply *a = &r->reply_body_u.areply;
        set_auth(&a->verf, &in->verf);
        a->reply_data.stat = (accept_stat)in->accept_stat;
        a->reply_data.accepted_reply_data_u.mismatch_info.low = in->low;
        a->reply_data.accepted_reply_data_u.mismatch_info.high = in->high;
    } else {
        rejected_reply *j = &r->reply_body_u.rreply;
        j->stat = (reject_stat)in->reject_stat;
        if (in->reject_stat == RPC_MISMATCH) {
            j->rejected_reply_u.mismatch_info.low = in->low;
            j->rejected_reply_u.mismatch_info.high = in->high;
        } else {
            j->rejected_reply_u.auth_stat = (auth_stat)in->auth_stat;
        }
    }
}

static int encode_with(xdrproc_t proc, void *value, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    XDR x;
    bool_t ok;

    xdrmem_create(&x, (char *)buf, cap, XDR_ENCODE);
    ok = proc(&x, value);
    *len = xdr_getpos(&x);
    xdr_destroy(&x);
    return ok ? ORACLE_OK : ORACLE_EENCODE;
}

/* Decodes `in` whole with `proc` into `value` (zeroed, `size` bytes), re-encodes it. */
static int reencode_with(xdrproc_t proc, void *value, size_t size, const uint8_t *in,
                         uint32_t in_len, uint8_t *out, uint32_t cap, uint32_t *out_len)
{
    XDR x;
    int rc;

    memset(value, 0, size);
    xdrmem_create(&x, (char *)in, in_len, XDR_DECODE);
    if (!proc(&x, value))
        rc = ORACLE_EDECODE;
    else if (xdr_getpos(&x) != in_len)
        rc = ORACLE_ETRAILING;
    else
        rc = encode_with(proc, value, out, cap, out_len);
    xdr_destroy(&x);
    xdr_free(proc, (char *)value);
    return rc;
}

int oracle_rpc_encode(const oracle_rpc_msg *msg, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    rpc_msg m;

    build_rpc(msg, &m);
    return encode_with((xdrproc_t)xdr_rpc_msg, &m, buf, cap, len);
}

int oracle_rpc_reencode(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                        uint32_t *out_len)
{
    rpc_msg m;

    return reencode_with((xdrproc_t)xdr_rpc_msg, &m, sizeof m, in, in_len, out, cap, out_len);
}

int oracle_authsys_encode(const oracle_authsys *p, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    authsys_parms a;
    char name[256];

    if (p->machinename_len > 255)
        return ORACLE_EENCODE;
    memcpy(name, p->machinename, p->machinename_len);
    name[p->machinename_len] = '\0';
    a.stamp = p->stamp;
    a.machinename = name;
    a.uid = p->uid;
    a.gid = p->gid;
    a.gids.gids_len = p->n_gids;
    a.gids.gids_val = (u_int *)p->gids;
    return encode_with((xdrproc_t)xdr_authsys_parms, &a, buf, cap, len);
}

int oracle_authsys_reencode(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t cap,
                            uint32_t *out_len)
{
    authsys_parms a;

    return reencode_with((xdrproc_t)xdr_authsys_parms, &a, sizeof a, in, in_len, out, cap,
                         out_len);
}

static const uint32_t flavors[] = {AUTH_NONE, AUTH_SYS, AUTH_SHORT, AUTH_DH, RPCSEC_GSS};

static void random_auth(uint64_t *s, oracle_auth *a, uint8_t *storage)
{
    uint32_t i;

    a->flavor = flavors[oracle_next(s) % 5];
    a->len = (uint32_t)(oracle_next(s) % 401); /* opaque body<400> */
    for (i = 0; i < a->len; i++)
        storage[i] = (uint8_t)oracle_next(s);
    a->body = storage;
}

int oracle_rpc_random(uint64_t seed, uint8_t *buf, uint32_t cap, uint32_t *len)
{
    uint8_t cred[400], verf[400];
    oracle_rpc_msg m;
    uint64_t s = seed * 2 + 1;

    memset(&m, 0, sizeof m);
    m.xid = (uint32_t)oracle_next(&s);
    m.mtype = (uint32_t)(oracle_next(&s) % 2);
    m.rpcvers = (uint32_t)oracle_next(&s);
    m.prog = (uint32_t)oracle_next(&s);
    m.vers = (uint32_t)oracle_next(&s);
    m.proc = (uint32_t)oracle_next(&s);
    random_auth(&s, &m.cred, cred);
    random_auth(&s, &m.verf, verf);
    m.reply_stat = (uint32_t)(oracle_next(&s) % 2);
    m.accept_stat = (uint32_t)(oracle_next(&s) % 6);
    m.reject_stat = (uint32_t)(oracle_next(&s) % 2);
    m.auth_stat = (uint32_t)(oracle_next(&s) % 15);
    m.low = (uint32_t)oracle_next(&s);
    m.high = (uint32_t)oracle_next(&s);
    return oracle_rpc_encode(&m, buf, cap, len);
}
