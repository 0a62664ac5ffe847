/*
 * What MIX computes (see interop.x), shared by the C server (to answer) and the C client (to
 * check our server's answers). The Rust side's definition is tirpc_interop::mix.
 */
#ifndef INTEROP_COMMON_H
#define INTEROP_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"

#define GREETING "hello, "

/* Fills *r from *a; returns 0, or -1 when out of memory. Free *r with free_mix. */
static int compute_mix(const mixed_args *a, mixed_res *r)
{
	u_int n = a->values.values_len;
	uint64_t sum = (uint64_t)(int64_t)a->small + (uint64_t)a->big;
	size_t name_len = strlen(a->name);
	u_int i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < n; i++)
		sum += (uint64_t)(int64_t)a->values.values_val[i];
	r->sum = (quad_t)sum;
	r->ubig_plus_one = a->ubig + 1;
	r->greeting = malloc(sizeof(GREETING) + name_len);
	r->reversed.reversed_val = malloc(n ? n * sizeof(int) : 1);
	if (r->greeting == NULL || r->reversed.reversed_val == NULL)
		return -1;
	memcpy(r->greeting, GREETING, sizeof(GREETING) - 1);
	memcpy(r->greeting + sizeof(GREETING) - 1, a->name, name_len + 1);
	r->reversed.reversed_len = n;
	for (i = 0; i < n; i++)
		r->reversed.reversed_val[i] = a->values.values_val[n - 1 - i];
	if (a->maybe != NULL) {
		r->doubled = malloc(sizeof(int));
		if (r->doubled == NULL)
			return -1;
		*r->doubled = (int)((unsigned int)*a->maybe * 2u);
	}
	r->not_flag = !a->flag;
	r->next_shade = (color)((a->shade + 1) % 3);
	for (i = 0; i < 4; i++)
		r->tag_reversed[i] = a->tag[3 - i];
	return 0;
}

static void free_mix(mixed_res *r)
{
	free(r->greeting);
	free(r->reversed.reversed_val);
	free(r->doubled);
	memset(r, 0, sizeof(*r));
}

#endif
