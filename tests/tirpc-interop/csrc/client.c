/*
 * An ONC RPC client for interop.x on libtirpc, through rpcgen's stubs (interop_clnt.c) and
 * clnt_call, connecting to 127.0.0.1:PORT directly (no portmapper).
 *
 *   interop_client PORT check     calls every procedure, checks every result and error
 *                                 status, prints what it saw; exits 1 on any mismatch
 *   interop_client PORT bench N   N NULL calls on one connection; prints the mean in µs
 *   interop_client PORT read N SIZE   N FILL calls of SIZE bytes; prints the mean in µs
 *   interop_client PORT write N SIZE  N SINK calls of SIZE bytes; prints the mean in µs
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rpc/rpc.h>

#include "common.h"
#include "interop.h"

static struct timeval TIMEOUT = {25, 0};
static int checks, failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		}                                                                                  \
	} while (0)

static CLIENT *connect_to(int port, u_long prog, u_long vers)
{
	struct sockaddr_in addr;
	int sock = RPC_ANYSOCK;
	CLIENT *c;

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons(port);
	c = clnttcp_create(&addr, prog, vers, &sock, 0, 0);
	if (c == NULL) {
		clnt_pcreateerror("clnttcp_create");
		exit(2);
	}
	return c;
}

static enum clnt_stat call_void(CLIENT *c, u_long proc)
{
	return clnt_call(c, proc, (xdrproc_t)xdr_void, NULL, (xdrproc_t)xdr_void, NULL, TIMEOUT);
}

static void check_echo(CLIENT *c, u_int len)
{
	echo_data arg, *res;
	u_int i;

	arg.echo_data_len = len;
	arg.echo_data_val = malloc(len ? len : 1);
	for (i = 0; i < len; i++)
		arg.echo_data_val[i] = (char)(i * 7 + len);
	res = echo_1(&arg, c);
	CHECK(res != NULL, "ECHO %u: %s", len, clnt_sperror(c, "echo_1"));
	if (res != NULL) {
		CHECK(res->echo_data_len == len && memcmp(res->echo_data_val, arg.echo_data_val, len) == 0,
		      "ECHO %u: %u bytes back, or other bytes", len, res->echo_data_len);
		clnt_freeres(c, (xdrproc_t)xdr_echo_data, (caddr_t)res);
	}
	free(arg.echo_data_val);
}

static void check_mix(CLIENT *c, mixed_args *arg)
{
	mixed_res want, *got;
	u_int i;

	if (compute_mix(arg, &want) != 0) {
		CHECK(0, "out of memory");
		return;
	}
	got = mix_1(arg, c);
	CHECK(got != NULL, "MIX: %s", clnt_sperror(c, "mix_1"));
	if (got == NULL) {
		free_mix(&want);
		return;
	}
	printf("MIX sum=%" PRId64 " ubig_plus_one=%" PRIu64 " greeting=\"%s\" reversed=%u doubled=%s "
	       "not_flag=%d next_shade=%d\n",
	       (int64_t)got->sum, (uint64_t)got->ubig_plus_one, got->greeting,
	       got->reversed.reversed_len, got->doubled ? "present" : "absent", got->not_flag,
	       got->next_shade);
	CHECK(got->sum == want.sum, "MIX sum %" PRId64 " != %" PRId64, (int64_t)got->sum,
	      (int64_t)want.sum);
	CHECK(got->ubig_plus_one == want.ubig_plus_one, "MIX ubig_plus_one");
	CHECK(strcmp(got->greeting, want.greeting) == 0, "MIX greeting \"%s\"", got->greeting);
	CHECK(got->reversed.reversed_len == want.reversed.reversed_len, "MIX reversed length");
	for (i = 0; i < want.reversed.reversed_len && i < got->reversed.reversed_len; i++)
		CHECK(got->reversed.reversed_val[i] == want.reversed.reversed_val[i], "MIX reversed[%u]",
		      i);
	CHECK((got->doubled == NULL) == (want.doubled == NULL), "MIX doubled presence");
	if (got->doubled != NULL && want.doubled != NULL)
		CHECK(*got->doubled == *want.doubled, "MIX doubled %d", *got->doubled);
	CHECK(got->not_flag == want.not_flag, "MIX not_flag");
	CHECK(got->next_shade == want.next_shade, "MIX next_shade");
	CHECK(memcmp(got->tag_reversed, want.tag_reversed, 4) == 0, "MIX tag_reversed");
	clnt_freeres(c, (xdrproc_t)xdr_mixed_res, (caddr_t)got);
	free_mix(&want);
}

static int check(int port)
{
	static const u_int sizes[] = {0, 1, 3, 4, 5, 1000, 70000, 1 << 20};
	CLIENT *c = connect_to(port, INTEROP_PROG, INTEROP_VERS);
	struct rpc_err err;
	enum clnt_stat stat;
	int values[] = {1, -2, 3, 2147483647};
	int maybe = -1073741825;
	mixed_args full = {
		.small = -7,
		.big = (quad_t)1 << 40,
		.ubig = UINT64_MAX,
		.name = "tirpc",
		.values = {4, values},
		.maybe = &maybe,
		.flag = TRUE,
		.shade = BLUE,
		.tag = {'a', 'b', 'c', 'd'},
	};
	mixed_args empty = {
		.small = 0,
		.big = -1,
		.ubig = 41,
		.name = "",
		.values = {0, NULL},
		.maybe = NULL,
		.flag = FALSE,
		.shade = RED,
		.tag = {0, 1, 2, 3},
	};
	u_int i;
	CLIENT *other;

	CHECK(interop_null_1(NULL, c) != NULL, "NULL: %s", clnt_sperror(c, "interop_null_1"));
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_echo(c, sizes[i]);
	printf("ECHO ok up to %u bytes\n", sizes[sizeof(sizes) / sizeof(sizes[0]) - 1]);
	check_mix(c, &full);
	check_mix(c, &empty);

	stat = call_void(c, FAIL);
	printf("FAIL -> %s\n", clnt_sperrno(stat));
	CHECK(stat == RPC_SYSTEMERROR, "FAIL gave %s", clnt_sperrno(stat));
	stat = call_void(c, 42);
	printf("procedure 42 -> %s\n", clnt_sperrno(stat));
	CHECK(stat == RPC_PROCUNAVAIL, "procedure 42 gave %s", clnt_sperrno(stat));

	/* AUTH_SYS credentials, then many calls on the same connection. */
	c->cl_auth = authunix_create_default();
	CHECK(interop_null_1(NULL, c) != NULL, "NULL with AUTH_SYS: %s", clnt_sperror(c, "null"));
	for (i = 0; i < 500; i++)
		check_echo(c, i);
	auth_destroy(c->cl_auth);
	clnt_destroy(c);

	other = connect_to(port, INTEROP_PROG, 2);
	stat = call_void(other, 0);
	clnt_geterr(other, &err);
	printf("version 2 -> %s (%lu..%lu)\n", clnt_sperrno(stat), (unsigned long)err.re_vers.low,
	       (unsigned long)err.re_vers.high);
	CHECK(stat == RPC_PROGVERSMISMATCH && err.re_vers.low == 1 && err.re_vers.high == 1,
	      "version 2 gave %s", clnt_sperrno(stat));
	clnt_destroy(other);

	other = connect_to(port, INTEROP_PROG + 1, 1);
	stat = call_void(other, 0);
	printf("program %#x -> %s\n", INTEROP_PROG + 1, clnt_sperrno(stat));
	CHECK(stat == RPC_PROGUNAVAIL, "an unknown program gave %s", clnt_sperrno(stat));
	clnt_destroy(other);

	printf("%s: %d checks, %d failed\n", failures ? "FAILED" : "ok", checks, failures);
	return failures ? 1 : 0;
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int bench(int port, long n)
{
	CLIENT *c = connect_to(port, INTEROP_PROG, INTEROP_VERS);
	double start;
	long i;

	for (i = 0; i < n / 10 + 1; i++)
		if (call_void(c, INTEROP_NULL) != RPC_SUCCESS)
			return 1;
	start = now_us();
	for (i = 0; i < n; i++)
		if (call_void(c, INTEROP_NULL) != RPC_SUCCESS)
			return 1;
	printf("mean_us=%.3f\n", (now_us() - start) / n);
	clnt_destroy(c);
	return 0;
}

/* One FILL (read) or SINK (write) of len bytes; 0 when it worked. */
static int bulk_call(CLIENT *c, int read, echo_data *data)
{
	if (read) {
		u_int len = data->echo_data_len;
		echo_data *res = fill_1(&len, c);
		int ok = res != NULL && res->echo_data_len == len;
		if (res != NULL)
			clnt_freeres(c, (xdrproc_t)xdr_echo_data, (caddr_t)res);
		return ok ? 0 : 1;
	} else {
		u_int *n = sink_1(data, c);
		return n != NULL && *n == data->echo_data_len ? 0 : 1;
	}
}

static int bench_bulk(int port, int read, long n, u_int len)
{
	CLIENT *c = connect_to(port, INTEROP_PROG, INTEROP_VERS);
	echo_data data;
	double start;
	long i;

	data.echo_data_len = len;
	data.echo_data_val = malloc(len ? len : 1);
	memset(data.echo_data_val, 0x5a, len);
	for (i = 0; i < n / 10 + 1; i++)
		if (bulk_call(c, read, &data) != 0)
			return 1;
	start = now_us();
	for (i = 0; i < n; i++)
		if (bulk_call(c, read, &data) != 0)
			return 1;
	printf("mean_us=%.3f\n", (now_us() - start) / n);
	free(data.echo_data_val);
	clnt_destroy(c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[2], "check") == 0)
		return check(atoi(argv[1]));
	if (argc == 4 && strcmp(argv[2], "bench") == 0)
		return bench(atoi(argv[1]), atol(argv[3]));
	if (argc == 5 && (strcmp(argv[2], "read") == 0 || strcmp(argv[2], "write") == 0))
		return bench_bulk(atoi(argv[1]), argv[2][0] == 'r', atol(argv[3]), (u_int)atol(argv[4]));
	fprintf(stderr, "usage: %s PORT check | %s PORT bench N | %s PORT read|write N SIZE\n", argv[0],
		argv[0], argv[0]);
	return 2;
}
