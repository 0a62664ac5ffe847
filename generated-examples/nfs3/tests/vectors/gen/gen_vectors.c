/*
 * gen_vectors.c -- the rpcgen oracle for the NFSv3 test vectors.
 *
 * Fills NFSv3 argument/result structures, encodes them with the XDR
 * routines that `rpcgen -c specs/nfs3.x` generates (and, for the whole
 * RPC call message, libtirpc's xdr_callmsg), and prints the bytes as
 * hex, one four-byte XDR unit per line.  Each value here is the same
 * value that the hand-annotated vector ../<name>.hex describes; run.sh
 * compares the two byte for byte.  Each encoding is also decoded back
 * and checked to consume exactly the bytes that were produced.
 *
 * Build and run: see run.sh (rpcgen + gcc against libtirpc).
 * Usage: gen_vectors <name>     prints one vector
 *        gen_vectors --list     prints the vector names
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rpc/rpc.h>

#include "nfs3.h"

/* Large enough for every vector below; overflow makes xdr_* fail. */
#define BUF_SIZE 1024

/* Values shared by the vectors (see the .hex files for their meaning). */
static char fh_bytes[8] = {
    (char)0xde, (char)0xad, (char)0xbe, (char)0xef, 0x00, 0x00, 0x00, 0x01,
};
static char write_payload[5] = { 'h', 'e', 'l', 'l', 'o' };
static char read_payload[6] = { 'a', 'b', 'c', 'd', 'e', 'f' };
static char link_target[] = "tmp";
static char link_name[] = "ln";

static void fill_fh(nfs_fh3 *fh)
{
    fh->data.data_len = sizeof fh_bytes;
    fh->data.data_val = fh_bytes;
}

static void fill_write3args(WRITE3args *args)
{
    memset(args, 0, sizeof *args);
    fill_fh(&args->file);
    args->offset = 4096;
    args->count = sizeof write_payload;
    args->stable = FILE_SYNC;
    args->data.data_len = sizeof write_payload;
    args->data.data_val = write_payload;
}

/* Prints buf[0..len) as hex, one XDR unit (4 bytes) per line. */
static void dump(const unsigned char *buf, unsigned int len)
{
    for (unsigned int i = 0; i < len; i++) {
        printf("%02x", buf[i]);
        if (i % 4 == 3 || i + 1 == len)
            putchar('\n');
    }
}

/*
 * Encodes `value` with `proc` into a fresh buffer, dumps it, then
 * decodes it back with the same routine and checks that decoding
 * consumed exactly the encoded length.
 */
static int encode_dump_check(xdrproc_t proc, void *value, size_t value_size)
{
    unsigned char buf[BUF_SIZE];
    XDR xdrs;
    unsigned int len;
    void *decoded;
    int ok;

    memset(buf, 0xa5, sizeof buf);
    xdrmem_create(&xdrs, (char *)buf, sizeof buf, XDR_ENCODE);
    if (!proc(&xdrs, value)) {
        fprintf(stderr, "gen_vectors: encoding failed\n");
        return 1;
    }
    len = xdr_getpos(&xdrs);
    xdr_destroy(&xdrs);
    dump(buf, len);

    decoded = calloc(1, value_size);
    if (decoded == NULL) {
        fprintf(stderr, "gen_vectors: out of memory\n");
        return 1;
    }
    xdrmem_create(&xdrs, (char *)buf, len, XDR_DECODE);
    ok = proc(&xdrs, decoded) && xdr_getpos(&xdrs) == len;
    xdr_destroy(&xdrs);
    xdr_free(proc, decoded);
    free(decoded);
    if (!ok) {
        fprintf(stderr, "gen_vectors: decoding the encoding back failed\n");
        return 1;
    }
    return 0;
}

static int write3args(void)
{
    WRITE3args args;

    fill_write3args(&args);
    return encode_dump_check((xdrproc_t)xdr_WRITE3args, &args, sizeof args);
}

/* The whole ONC RPC call message (RFC 5531 section 9) carrying WRITE3args. */
static int write3_call_msg(void)
{
    unsigned char buf[BUF_SIZE];
    struct rpc_msg msg;
    WRITE3args args;
    XDR xdrs;

    memset(&msg, 0, sizeof msg);
    msg.rm_xid = 0x4e465333; /* "NFS3" */
    msg.rm_direction = CALL;
    msg.rm_call.cb_rpcvers = RPC_MSG_VERSION;
    msg.rm_call.cb_prog = NFS_PROGRAM;
    msg.rm_call.cb_vers = NFS_V3;
    msg.rm_call.cb_proc = NFSPROC3_WRITE;
    msg.rm_call.cb_cred = _null_auth;
    msg.rm_call.cb_verf = _null_auth;
    fill_write3args(&args);

    memset(buf, 0xa5, sizeof buf);
    xdrmem_create(&xdrs, (char *)buf, sizeof buf, XDR_ENCODE);
    if (!xdr_callmsg(&xdrs, &msg) || !xdr_WRITE3args(&xdrs, &args)) {
        fprintf(stderr, "gen_vectors: encoding the call message failed\n");
        return 1;
    }
    dump(buf, xdr_getpos(&xdrs));
    xdr_destroy(&xdrs);
    return 0;
}

static int read3res_ok(void)
{
    READ3res res;
    READ3resok *ok = &res.READ3res_u.resok;

    memset(&res, 0, sizeof res);
    res.status = NFS3_OK;
    ok->file_attributes.attributes_follow = FALSE;
    ok->count = sizeof read_payload;
    ok->eof = TRUE;
    ok->data.data_len = sizeof read_payload;
    ok->data.data_val = read_payload;
    return encode_dump_check((xdrproc_t)xdr_READ3res, &res, sizeof res);
}

static int read3res_fail(void)
{
    READ3res res;

    memset(&res, 0, sizeof res);
    res.status = NFS3ERR_IO;
    res.READ3res_u.resfail.file_attributes.attributes_follow = FALSE;
    return encode_dump_check((xdrproc_t)xdr_READ3res, &res, sizeof res);
}

static int readlink3res_ok(void)
{
    READLINK3res res;
    READLINK3resok *ok = &res.READLINK3res_u.resok;

    memset(&res, 0, sizeof res);
    res.status = NFS3_OK;
    ok->symlink_attributes.attributes_follow = FALSE;
    ok->data = link_target;
    return encode_dump_check((xdrproc_t)xdr_READLINK3res, &res, sizeof res);
}

static int symlink3args(void)
{
    SYMLINK3args args;
    sattr3 *attrs = &args.symlink.symlink_attributes;

    memset(&args, 0, sizeof args);
    fill_fh(&args.where.dir);
    args.where.name = link_name;
    attrs->mode.set_it = TRUE;
    attrs->mode.set_mode3_u.mode = 0777;
    attrs->uid.set_it = FALSE;
    attrs->gid.set_it = FALSE;
    attrs->size.set_it = FALSE;
    attrs->atime.set_it = DONT_CHANGE;
    attrs->mtime.set_it = SET_TO_SERVER_TIME;
    args.symlink.symlink_data = link_target;
    return encode_dump_check((xdrproc_t)xdr_SYMLINK3args, &args, sizeof args);
}

struct vector {
    const char *name;
    int (*generate)(void);
};

static const struct vector vectors[] = {
    { "write3args", write3args },
    { "write3_call_msg", write3_call_msg },
    { "read3res_ok", read3res_ok },
    { "read3res_fail", read3res_fail },
    { "readlink3res_ok", readlink3res_ok },
    { "symlink3args", symlink3args },
};

int main(int argc, char **argv)
{
    size_t i;

    if (argc != 2) {
        fprintf(stderr, "usage: gen_vectors <name> | --list\n");
        return 2;
    }
    for (i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        if (strcmp(argv[1], "--list") == 0)
            puts(vectors[i].name);
        else if (strcmp(argv[1], vectors[i].name) == 0)
            return vectors[i].generate();
    }
    if (strcmp(argv[1], "--list") == 0)
        return 0;
    fprintf(stderr, "gen_vectors: unknown vector %s\n", argv[1]);
    return 2;
}
