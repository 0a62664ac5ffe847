/*
 * An ONC RPC server for interop.x on libtirpc: rpcgen's dispatcher (interop_svc.c) and these
 * procedures. Listens on 127.0.0.1 (port argv[1], default any), prints the port on stdout,
 * and serves version 1 over TCP until killed. Registered with protocol 0: no rpcbind needed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rpc/rpc.h>

#include "common.h"
#include "interop.h"

extern void interop_prog_1(struct svc_req *, SVCXPRT *);

/*
 * rpcgen's dispatcher sends what a procedure returns (static storage, as its results must
 * outlive the call), or nothing when it returns NULL because it answered itself.
 */
void *interop_null_1_svc(void *argp, struct svc_req *rqstp)
{
	static char nothing;
	return &nothing;
}

echo_data *echo_1_svc(echo_data *argp, struct svc_req *rqstp)
{
	/* The arguments are freed after the reply is sent. */
	static echo_data result;
	result = *argp;
	return &result;
}

mixed_res *mix_1_svc(mixed_args *argp, struct svc_req *rqstp)
{
	static mixed_res result;
	free_mix(&result);
	if (compute_mix(argp, &result) != 0) {
		svcerr_systemerr(rqstp->rq_xprt);
		return NULL;
	}
	return &result;
}

/* The bytes FILL answers with: one buffer, grown when a call asks for more. */
echo_data *fill_1_svc(u_int *argp, struct svc_req *rqstp)
{
	static echo_data result;
	static u_int have;
	if (*argp > have) {
		char *grown = realloc(result.echo_data_val, *argp);
		if (grown == NULL) {
			svcerr_systemerr(rqstp->rq_xprt);
			return NULL;
		}
		memset(grown, 0xa5, *argp);
		result.echo_data_val = grown;
		have = *argp;
	}
	result.echo_data_len = *argp;
	return &result;
}

u_int *sink_1_svc(echo_data *argp, struct svc_req *rqstp)
{
	static u_int result;
	result = argp->echo_data_len;
	return &result;
}

void *fail_1_svc(void *argp, struct svc_req *rqstp)
{
	svcerr_systemerr(rqstp->rq_xprt);
	return NULL;
}

/* Version 2 is never registered (callers get PROG_MISMATCH); rpcgen still refers to it. */
void *interop_null_2_2_svc(void *argp, struct svc_req *rqstp)
{
	static char nothing;
	return &nothing;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr;
	socklen_t len = sizeof(addr);
	int one = 1;
	int sock = socket(AF_INET, SOCK_STREAM, 0);
	SVCXPRT *xprt;

	if (sock < 0) {
		perror("socket");
		return 1;
	}
	setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons(argc > 1 ? atoi(argv[1]) : 0);
	if (bind(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(sock, 64) < 0 ||
	    getsockname(sock, (struct sockaddr *)&addr, &len) < 0) {
		perror("bind/listen");
		return 1;
	}
	xprt = svctcp_create(sock, 0, 0);
	if (xprt == NULL) {
		fprintf(stderr, "svctcp_create failed\n");
		return 1;
	}
	if (!svc_register(xprt, INTEROP_PROG, INTEROP_VERS, interop_prog_1, 0)) {
		fprintf(stderr, "svc_register failed\n");
		return 1;
	}
	printf("%d\n", ntohs(addr.sin_port));
	fflush(stdout);
	svc_run();
	fprintf(stderr, "svc_run returned\n");
	return 1;
}
