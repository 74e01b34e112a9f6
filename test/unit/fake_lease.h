/*
 * A fake of the API server's Lease calls (struct shared_api), for unit tests: one Lease held in
 * memory with the API server's resourceVersion rules (update with a stale version -> 409
 * KUBE_ECONFLICT, create of an existing Lease -> 409, get or update of a missing one -> 404), and
 * controls to inject failures and another writer. Test double, not a client of a real server.
 * Header-only (static functions), like fixture.h.
 */
#ifndef GMG_TEST_FAKE_LEASE_H
#define GMG_TEST_FAKE_LEASE_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonpath.h"
#include "kube.h"
#include "shared.h"

struct fake_lease {
	pthread_mutex_t mu;
	cJSON *lease; /* the one node's Lease, or NULL */
	unsigned long rv;
	int gets, creates, updates, conflicts;
	int fail_next_write; /* answer the next write with this KUBE_E* (0: none) */
	int fail_next_get;
	int write_delay_us; /* every write sleeps this long first (a slow API server) */
	/* Called once before the next update is applied (another replica's write lands first). */
	void (*before_update)(struct fake_lease *f);
};

static inline cJSON *fake_lease_stored(struct fake_lease *f)
{
	char rv[32];
	cJSON *c = cJSON_Duplicate(f->lease, 1);
	snprintf(rv, sizeof(rv), "%lu", f->rv);
	cJSON *meta = cJSON_GetObjectItem(c, "metadata");
	cJSON_DeleteItemFromObject(meta, "resourceVersion");
	cJSON_AddStringToObject(meta, "resourceVersion", rv);
	return c;
}

static inline int fake_lease_get(void *ctx, const char *ns, const char *name, cJSON **lease,
                                 long *code, char *err, size_t errlen)
{
	struct fake_lease *f = ctx;
	int rc = 0;
	(void)ns, (void)name;
	pthread_mutex_lock(&f->mu);
	f->gets++;
	if (f->fail_next_get) {
		rc = f->fail_next_get;
		f->fail_next_get = 0;
		snprintf(err, errlen, "get lease: injected failure");
	} else if (f->lease == NULL) {
		rc = KUBE_ENOTFOUND;
		*code = 404;
		snprintf(err, errlen, "get lease: HTTP 404");
	} else {
		*lease = fake_lease_stored(f);
		*code = 200;
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

static inline int fake_lease_store_locked(struct fake_lease *f, const cJSON *lease, cJSON **out)
{
	cJSON_Delete(f->lease);
	f->lease = cJSON_Duplicate(lease, 1);
	f->rv++;
	*out = fake_lease_stored(f);
	return 0;
}

static inline int fake_lease_create(void *ctx, const char *ns, const cJSON *lease, cJSON **out,
                                    long *code, char *err, size_t errlen)
{
	struct fake_lease *f = ctx;
	int rc;
	(void)ns;
	if (f->write_delay_us > 0)
		usleep((useconds_t)f->write_delay_us);
	pthread_mutex_lock(&f->mu);
	f->creates++;
	if (f->fail_next_write) {
		rc = f->fail_next_write;
		f->fail_next_write = 0;
		snprintf(err, errlen, "create lease: injected failure");
	} else if (f->lease != NULL) {
		rc = KUBE_ECONFLICT;
		f->conflicts++;
		*code = 409;
		snprintf(err, errlen, "create lease: HTTP 409: already exists");
	} else {
		rc = fake_lease_store_locked(f, lease, out);
		*code = 201;
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

static inline int fake_lease_update(void *ctx, const char *ns, const char *name, const cJSON *lease,
                                    cJSON **out, long *code, char *err, size_t errlen)
{
	struct fake_lease *f = ctx;
	int rc;
	(void)ns, (void)name;
	void (*hook)(struct fake_lease *) = f->before_update;
	if (hook != NULL) {
		f->before_update = NULL;
		hook(f);
	}
	if (f->write_delay_us > 0)
		usleep((useconds_t)f->write_delay_us);
	pthread_mutex_lock(&f->mu);
	f->updates++;
	const char *want = json_str(lease, "metadata", "resourceVersion", NULL);
	char have[32];
	snprintf(have, sizeof(have), "%lu", f->rv);
	if (f->fail_next_write) {
		rc = f->fail_next_write;
		f->fail_next_write = 0;
		snprintf(err, errlen, "update lease: injected failure");
	} else if (f->lease == NULL) {
		rc = KUBE_ENOTFOUND;
		*code = 404;
		snprintf(err, errlen, "update lease: HTTP 404");
	} else if (want != NULL && strcmp(want, have) != 0) {
		rc = KUBE_ECONFLICT;
		f->conflicts++;
		*code = 409;
		snprintf(err, errlen, "update lease: HTTP 409: the object has been modified");
	} else {
		rc = fake_lease_store_locked(f, lease, out);
		*code = 200;
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

static inline struct fake_lease *fake_lease_new(void)
{
	struct fake_lease *f = calloc(1, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	f->rv = 100;
	return f;
}

static inline void fake_lease_free(struct fake_lease *f)
{
	cJSON_Delete(f->lease);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* shared_api over f. */
static inline struct shared_api fake_lease_api(struct fake_lease *f)
{
	return (struct shared_api){fake_lease_get, fake_lease_create, fake_lease_update, f};
}

#endif
