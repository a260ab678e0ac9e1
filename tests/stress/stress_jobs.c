/* SPDX-License-Identifier: MIT */
/*
 * tests/stress/stress_jobs.c: the jobs layer's shared state under worker
 * threads: count() (per-thread counter blocks, summed by
 * vjob_kind_counter) and log() (a module's rate limiter, then the queue
 * that workers only try and its writer thread). 2,000 tasks
 * (VOLTD_STRESS_SCALE x) on 3 workers each run a job of one of 8 modules'
 * kinds, add a tagged amount to its counter and log one tagged line. Then:
 * every counter holds exactly its tasks' sum; every tagged line was printed
 * at most once, and printed + held back by the limiter + dropped by the
 * queue (both counts said by voltd's own lines) is every line logged.
 * Threads: 3 workers, the log writer, watchdog, main. Also run under TSan.
 */
#include "jobs/internal.h"
#include "base/compiler.h"
#include "stress_rt_harness.h"

#include <fcntl.h>

#define MODS 8
#define WORKERS 3

static struct voltd_kind kinds[MODS][2];
static struct voltd_module descs[MODS];
static char names[MODS][8], routes[MODS][16];
static struct vjob_mod *mods[MODS];
static const struct voltd_counter counters[] = { { .name = "sum", .help = "tags added" }, { .name = NULL } };

static int never(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	(void)state;
	(void)deadline_ns;
	return voltd->respond(job, 200, NULL, NULL, 0, VOLTD_BODY_STATIC);
}

struct jtask {
	struct vrt_task t;
	uint32_t id;
};

static uint32_t ntotal;
static _Atomic uint64_t n_done;
static uint64_t want[MODS];

static void jt_drop(struct vrt_task *t)
{
	free(vb_container_of(t, struct jtask, t));
	atomic_fetch_add_explicit(&n_done, 1, memory_order_relaxed);
}

static enum vrt_poll jt_poll(struct vrt_task *t)
{
	struct jtask *x = vb_container_of(t, struct jtask, t);
	unsigned m = x->id % MODS;
	struct vjob_input in = { .method = "GET" };
	struct vjob *job;

	SH_CHECK(vjob_new(&mods[m]->kinds[0], &in, &job) == 0, "vjob_new");
	voltd->count((struct voltd_job *)job, 0, x->id + 1);
	voltd->log(voltd->mod_of((struct voltd_job *)job), VOLTD_LOG_WARNING, "stress t%u", x->id);
	vjob_free(job);
	sh_progress();
	return VRT_READY;
}

static const struct vrt_task_vtable jt_vt = { .poll = jt_poll, .drop = jt_drop };

static void dump(void)
{
	fprintf(stderr, "stress_jobs: %" PRIu64 " of %u tasks done\n", atomic_load(&n_done), ntotal);
}

int main(void)
{
	char err[256], path[] = "/tmp/stress_jobs.XXXXXX";
	struct vrt *rt;

	sh_init("stress_jobs", 5.0, 120.0);
	sh_dump_extra = dump;
	ntotal = (uint32_t)sh_size(2000);
	vjob_threads_set(WORKERS);
	for (unsigned m = 0; m < MODS; m++) {
		snprintf(names[m], sizeof(names[m]), "m%u", m);
		snprintf(routes[m], sizeof(routes[m]), "/m%u", m);
		kinds[m][0] = (struct voltd_kind){ .name = names[m], .route = routes[m], .methods = "GET",
						   .step = never, .counters = counters };
		descs[m] = (struct voltd_module){ VOLTD_MODULE_HEAD, .name = names[m], .version = "1",
						  .kinds = kinds[m] };
		SH_CHECK(vjob__mod_new(names[m], "(stress)", NULL, &descs[m], &mods[m], err, sizeof(err)) == 0, "%s",
			 err);
		SH_CHECK(vjob_mod_start(mods[m], 0, err, sizeof(err)) == 0, "%s", err);
	}
	vjob_registry_freeze(); /* starts the log writer */
	voltd = &vjob__host;

	/* What the writer and the workers print goes to a file we read after. */
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	SH_CHECK(fd >= 0 && saved >= 0, "mkstemp");
	vb_log_init(false);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);

	rt = sh_rt_new(WORKERS, true, NULL);
	for (uint32_t i = 0; i < ntotal; i++) {
		struct jtask *x = malloc(sizeof(*x));
		SH_CHECK(x, "out of memory");
		vrt_task_init(&x->t, &jt_vt);
		x->id = i;
		want[i % MODS] += i + 1;
		SH_CHECK(vrt_spawn_detached(rt, &x->t) == 0, "spawn refused");
	}
	while (atomic_load(&n_done) < ntotal)
		usleep(1000);
	sh_rt_free(rt, VRT_SHUTDOWN_DRAIN);
	vjob_mod_shutdown_all(); /* the writer finishes the queue and says what it dropped */
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);

	for (unsigned m = 0; m < MODS; m++)
		SH_CHECK(vjob_kind_counter(&mods[m]->kinds[0], 0) == want[m], "module %u: counter %" PRIu64 ", want %" PRIu64,
			 m, vjob_kind_counter(&mods[m]->kinds[0], 0), want[m]);

	/* The lines. */
	FILE *f = fdopen(fd, "r");
	SH_CHECK(f && fseek(f, 0, SEEK_SET) == 0, "reopen");
	uint8_t *seen = calloc(ntotal, 1);
	uint64_t printed = 0, held = 0, dropped = 0;
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "stress t");
		unsigned id, n;
		unsigned long long d;
		if (p && sscanf(p, "stress t%u", &id) == 1) {
			SH_CHECK(id < ntotal && !seen[id], "line t%u printed twice or unknown", id);
			seen[id] = 1;
			printed++;
			p = strstr(p, "(");
			if (p && sscanf(p, "(%u more line(s) held back)", &n) == 1)
				held += n;
		} else if ((p = strstr(line, "jobs: ")) && sscanf(p, "jobs: %llu module log line(s) dropped", &d) == 1) {
			dropped += d;
		}
	}
	fclose(f);
	unlink(path);
	/* what the limiters still hold back (no later line said it) */
	for (unsigned m = 0; m < MODS; m++)
		held += atomic_load_explicit(&mods[m]->log_rl.suppressed, memory_order_relaxed);
	printf("# %u lines logged: %" PRIu64 " printed, %" PRIu64 " held back, %" PRIu64 " dropped\n", ntotal, printed,
	       held, dropped);
	SH_CHECK(printed + held + dropped == ntotal, "%" PRIu64 " + %" PRIu64 " + %" PRIu64 " != %u", printed, held,
		 dropped, ntotal);
	SH_CHECK(printed >= 1, "nothing printed");
	free(seen);
	sh_done();
	return 0;
}
