/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_server_pool.c: stress test of the connection-object pool
 * (src/server/pool.c): threads take and give back objects at once (as
 * acceptors and drop() do on different threads); nothing is handed out
 * twice, nothing is lost, objects come zeroed. Runs under TSan.
 */
#include "config.h"
#include "server/internal.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define THREADS 4
#define ROUNDS 20000
#define HOLD 64

static struct vsrv *srv;
static _Atomic unsigned long handed, returned;

static void *worker(void *arg)
{
	struct vsrv_conn *held[HOLD];
	unsigned n = 0;
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (unsigned r = 0; r < ROUNDS; r++) {
		if (n < HOLD && (n == 0 || rand_r(&seed) % 2)) {
			struct vsrv_conn *c = vsrv__conn_alloc(srv);

			assert_non_null(c);
			/* zeroed, and ours alone: the mark is checked below */
			assert_int_equal(c->next_seq, 0);
			c->next_seq = (uint64_t)(uintptr_t)c;
			held[n++] = c;
			atomic_fetch_add(&handed, 1);
		} else {
			struct vsrv_conn *c = held[rand_r(&seed) % n];

			assert_int_equal(c->next_seq, (uint64_t)(uintptr_t)c);
			for (unsigned i = 0; i < n; i++)
				if (held[i] == c) {
					held[i] = held[--n];
					break;
				}
			vsrv__conn_dealloc(srv, c);
			atomic_fetch_add(&returned, 1);
		}
	}
	while (n) {
		vsrv__conn_dealloc(srv, held[--n]);
		atomic_fetch_add(&returned, 1);
	}
	return NULL;
}

static void test_pool_stress(void **state)
{
	pthread_t t[THREADS];

	(void)state;
	srv = calloc(1, sizeof(*srv));
	assert_non_null(srv);
	vsrv__mem_init(srv);
	for (uintptr_t i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&handed), atomic_load(&returned));
	/* every object is back: the free list holds exactly what was carved */
	unsigned long carved = (srv->pool_n - 1) * VSRV_POOL_CHUNK + srv->pool_used, free_n = 0;
	for (struct vsrv_conn *c = srv->pool_free; c; c = *(struct vsrv_conn **)c)
		free_n++;
	assert_int_equal(free_n, carved);
	assert_true(carved <= THREADS * HOLD);
	vsrv__mem_fini(srv);
	free(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_stress),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
