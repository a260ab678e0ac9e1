/* SPDX-License-Identifier: MIT */
/*
 * journal: a blocking kind. POST /v1/journal appends the request body to a
 * file as one record and answers 201 "offset N length L\n" once the record
 * is on disk (fdatasync(2)).
 *
 * write(2) and fdatasync(2) block the calling thread for as long as the
 * disk takes, as a database driver or a synchronous SDK does, so the kind
 * is flagged VOLTD_KIND_BLOCKING: its steps run on voltd's blocking threads
 * ([modules] blocking_threads), never on a worker, and may block and wait
 * on a lock. Its start runs there too; it only checks the request.
 *
 * What it shows: a blocking kind; init and shutdown with the module's own
 * data (the open file, found again with voltd->mod_data); init that
 * acquires nothing when voltd only checks the configuration (`voltd -t`,
 * VOLTD_INIT_CHECK); a string key (file, restart-only: string keys always
 * are) and a live boolean key (sync); the request body; a log line.
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fdatasync */

#include <voltd/module.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { KEY_FILE, KEY_SYNC };
enum { COUNTER_BYTES };

/* The module's data, made by init: one file for every job. */
struct journal {
	int fd;
	/* The offset and the write of one record go together: jobs on other
	 * blocking threads wait here (a blocking kind may wait on a lock; a
	 * kind on the workers may not). */
	pthread_mutex_t lock;
};

static int journal_init(struct voltd_mod *mod, uint32_t flags, void **data, char *err,
			size_t errlen)
{
	const char *file = voltd->key_str(mod, KEY_FILE);
	struct journal *j;

	if (file[0] != '/') {
		snprintf(err, errlen, "file: '%s' is not an absolute path", file);
		return -EINVAL;
	}
	/* `voltd -t`: the keys are checked, nothing is opened. */
	if (flags & VOLTD_INIT_CHECK)
		return 0;
	j = malloc(sizeof(*j));
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	j->fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (j->fd < 0) {
		int e = errno;

		snprintf(err, errlen, "%s: %s", file, strerror(e));
		free(j);
		return -e;
	}
	pthread_mutex_init(&j->lock, NULL);
	voltd->log(mod, VOLTD_LOG_INFO, "appending to %s", file);
	*data = j;
	return 0;
}

static void journal_shutdown(struct voltd_mod *mod, void *data)
{
	struct journal *j = data;

	(void)mod;
	close(j->fd);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

/* On a worker: check the request only. */
static int journal_start(struct voltd_job *job, void *state)
{
	size_t len;

	(void)state;
	voltd->body(job, &len);
	if (len == 0)
		return voltd->respondf(job, 400, "an empty record (POST the record as the body)\n");
	return VOLTD_STEP_MORE;
}

/* On a blocking thread: one step does the whole write. */
static int journal_step(struct voltd_job *job, void *state, int64_t deadline_ns)
{
	const struct voltd_mod *mod = voltd->mod_of(job);
	struct journal *j = voltd->mod_data(mod);
	size_t len, done = 0;
	const uint8_t *rec = voltd->body(job, &len);
	off_t at;
	int e = 0;

	(void)state;
	(void)deadline_ns;
	pthread_mutex_lock(&j->lock);
	at = lseek(j->fd, 0, SEEK_END);
	if (at < 0)
		e = errno;
	while (!e && done < len) {
		ssize_t n = write(j->fd, rec + done, len - done);

		if (n < 0 && errno != EINTR)
			e = errno;
		else if (n > 0)
			done += (size_t)n;
	}
	pthread_mutex_unlock(&j->lock);
	if (!e && voltd->key_int(mod, KEY_SYNC) && fdatasync(j->fd) < 0)
		e = errno;
	if (e) {
		voltd->log(mod, VOLTD_LOG_ERR, "write to %s: %s", voltd->key_str(mod, KEY_FILE),
			   strerror(e));
		return voltd->respondf(job, 500, "the record was not written: %s\n", strerror(e));
	}
	voltd->count(job, COUNTER_BYTES, len);
	return voltd->respondf(job, 201, "offset %jd length %zu\n", (intmax_t)at, len);
}

static const struct voltd_counter journal_counters[] = {
	{ .name = "bytes", .help = "bytes appended to the file" },
	{ .name = NULL },
};

static const struct voltd_kind journal_kinds[] = {
	{
		.name = "journal",
		.route = "/v1/journal",
		.methods = "POST",
		.flags = VOLTD_KIND_BLOCKING,
		.start = journal_start,
		.step = journal_step,
		.counters = journal_counters,
		.doc = "appends the body to a file, on disk before the answer",
	},
	{ .name = NULL },
};

static const struct voltd_key journal_keys[] = {
	{
		.name = "file",
		.type = VOLTD_KEY_STRING,
		.def = "/var/lib/voltd/journal",
		.max = 4096,
		.doc = "the file records are appended to (absolute; voltd's user must be able to write it)",
	},
	{
		.name = "sync",
		.type = VOLTD_KEY_BOOL,
		.flags = VOLTD_KEY_LIVE,
		.def = "on",
		.doc = "fdatasync the file before each answer",
	},
	{ .name = NULL },
};

static const struct voltd_module journal_module = {
	VOLTD_MODULE_HEAD,
	.name = "journal",
	.version = "1.0.0",
	.kinds = journal_kinds,
	.keys = journal_keys,
	.init = journal_init,
	.shutdown = journal_shutdown,
};

VOLTD_MODULE(journal_module)
