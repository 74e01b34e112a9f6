/*
 * apiserver_double: a TEST DOUBLE of the Kubernetes API server, for integration tests and the
 * benchmark only. It is not a Kubernetes implementation: it serves the few reads, writes and
 * watches the webhook and its cache make, from in-memory state loaded from JSON files, the way
 * kube-apiserver answers them.
 *
 * Served over HTTPS (libmicrohttpd + GnuTLS, a certificate the test harness generates), every
 * request must carry "Authorization: Bearer <token>" or, when client_ca_pem is set, a client
 * certificate that CA issued (401 with a Status body otherwise):
 *   GET  /api/v1/nodes/NAME
 *   GET  /api/v1/namespaces/NS/pods/NAME
 *   GET  /api/v1/pods?fieldSelector=...&limit=N&continue=T   (also /api/v1/namespaces/NS/pods)
 *        fieldSelector terms: spec.nodeName, status.phase, metadata.name, metadata.namespace
 *        with =, == or != (an unknown field is a 400, as the real API server answers); pages of
 *        at most min(limit, max_page) items with an opaque continue token.
 *   GET  /api/v1/nodes?fieldSelector=metadata.name...&limit=N&continue=T   (the same for nodes)
 *   GET  /api/v1/pods?watch=1&resourceVersion=N&allowWatchBookmarks=true&timeoutSeconds=T
 *        (watch=true too; /api/v1/nodes likewise): see "Watches" below.
 *   POST /api/v1/namespaces/NS/pods                 create a pod (201)
 *   POST /api/v1/namespaces/NS/pods/NAME/binding    set spec.nodeName from target.name (201)
 *   DELETE /api/v1/namespaces/NS/pods/NAME
 *   GET | PUT | DELETE /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME,
 *   POST /apis/coordination.k8s.io/v1/namespaces/NS/leases: see "Leases" below.
 *   GET  /apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies (list, watch)
 *   PATCH /apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies/NAME/status: a JSON merge patch
 *        (Content-Type application/merge-patch+json, else 415) of which only status is
 *        applied (RFC 7386), a new resourceVersion and a MODIFIED event; 404 when absent.
 * Test controls (no token, for curl during manual testing; tests use the C functions below):
 *   POST /_double/fail?code=N (0 = off), /_double/delay?ms=N, /_double/expire-continue?times=N,
 *        /_double/fail-lease-writes?code=N&times=M, /_double/delay-lease-writes?ms=N
 *   GET  /_double/stats
 *
 * Resource versions: one global counter (starting at 1000). Every mutation (put, bind,
 * set_phase, delete, POST pod, POST binding, DELETE) bumps it, writes it into the object's
 * metadata.resourceVersion and appends an event (ADDED, MODIFIED, DELETED with the object) to
 * its resource's history, the last 10,000 events per resource. Lists carry
 * metadata.resourceVersion; every page of one list reports the first page's (the token carries
 * it), as kube-apiserver does, but the pages are read from live state, not a snapshot (a change
 * made between pages shows in a later page, and a watch from the list's version replays it).
 * Order is insertion order (a replaced object keeps its place). Gets and puts are O(1) (hash by
 * namespace/name), a page costs its own items: 150,000 pods load and list fine.
 *
 * Watches: a chunked stream of newline-terminated events: every event with resourceVersion > N,
 * then new ones as they happen; with allowWatchBookmarks, a BOOKMARK (an object of the kind with
 * only metadata.resourceVersion, the current version) whenever the stream has been caught up for
 * the bookmark interval (default 1 s). If N is older than the history kept (or a compaction),
 * one ERROR event with a Status 410 (reason Expired, "too old resource version") then the end of
 * the stream, as the real API server does; the same when a watcher falls more than the history
 * behind. The stream ends cleanly after timeoutSeconds (default 1800, at most 86400), at
 * apiserver_double_cut_watches and at apiserver_double_stop. resourceVersion absent, "" or "0":
 * from now on (unlike the real server, no synthetic ADDED events of the current objects first).
 * Not supported (400): fieldSelector on a watch, namespaced watches. A watch stream has no idle
 * timeout; a vanished client is noticed at the next write (a bookmark at the latest).
 *
 * Leases (coordination.k8s.io/v1), as kube-apiserver v1.33 serves them (k8s.io/apiserver
 * v0.33.13 handlers and generic registry, the lease strategy: create on update allowed,
 * unconditional update not). Every write is one atomic step under the double's lock: the
 * resourceVersion comparison and the store, as etcd's transaction makes them.
 *   GET    200 the lease as stored; 404 NotFound `leases.coordination.k8s.io "NAME" not found`.
 *   POST   201 the lease as stored: metadata.uid and creationTimestamp set by the double (the
 *          client's are wiped), metadata.namespace the URL's, metadata.resourceVersion the next
 *          global one, kind and apiVersion filled in; generateName is honoured. 409
 *          AlreadyExists `leases.coordination.k8s.io "NAME" already exists` when the name is
 *          taken; 500 (no reason) "resourceVersion should not be set on objects to be created"
 *          when the body carries a non-zero numeric one.
 *   PUT    an existing lease: the body's metadata.resourceVersion must equal the stored one:
 *          absent or "0": 422 Invalid (`... metadata.resourceVersion: Invalid value: 0x0: must
 *          be specified for an update`); another: 409 Conflict `Operation cannot be fulfilled
 *          on leases.coordination.k8s.io "NAME": the object has been modified; please apply
 *          your changes to the latest version and try again`; equal: 200, stored with the next
 *          resourceVersion (uid and creationTimestamp kept), or unchanged with no new version
 *          when the body equals the stored object (etcd's no-op update). A body metadata.uid
 *          other than the stored one: 409 Conflict (precondition). A lease that does not
 *          exist: created (201), whatever resourceVersion the body carries.
 *   DELETE 200 Success Status with details; 404; DeleteOptions preconditions (uid,
 *          resourceVersion) in the body: 409 Conflict when they do not hold.
 *   400 BadRequest, as the decoder and handler answer: a body that is not a JSON object, a kind
 *   other than Lease or an apiVersion other than coordination.k8s.io/v1 (absent ones default),
 *   a known field of the wrong JSON type (metadata strings and maps, spec fields), a
 *   metadata.namespace other than the URL's, on PUT a metadata.name other than the URL's.
 *   422 Invalid: name missing or not a DNS-1123 subdomain, annotations over 256 KiB (keys +
 *   values), spec.leaseDurationSeconds <= 0, spec.leaseTransitions < 0.
 *   Bodies are stored as sent otherwise (unknown fields and annotations kept; no
 *   managedFields). Not served: lists and watches of leases, PATCH, dryRun (400 or 405 saying
 *   so); namespaces need not exist; no RBAC (every authenticated request may write).
 *
 * Failure injection: fail (every API call answers code with a Status body, watches included),
 * delay (each API answer waits; woken early by stop), down (apiserver_double_stop: the port is
 * closed, then apiserver_double_start reopens it on the same port), expired continue tokens,
 * compaction, watch cuts, watches answered 410, a lease deleted just before a PUT of it and the
 * PUT answered 404 (apiserver_double_delete_lease_before_put; not what kube-apiserver does).
 *
 * Thread-safe: all functions may be called while the double serves requests.
 */
#ifndef GMG_TEST_APISERVER_DOUBLE_H
#define GMG_TEST_APISERVER_DOUBLE_H

#include <stddef.h>

struct apiserver_double;

struct apiserver_double_opts {
	const char *cert_pem; /* server certificate chain, PEM (copied) */
	const char *key_pem;  /* its private key, PEM (copied) */
	const char *token;    /* bearer token every API request must present (copied) */
	unsigned short port;  /* 0: the kernel picks a free loopback port */
	unsigned max_page;    /* cap on items per list page, whatever limit asks (0: none) */
	int allow_old_tls;    /* 1: also TLS 1.0/1.1 (a control for the TLS 1.1 refusal test) */
	const char *client_ca_pem; /* when set, a client certificate verified against this CA
	                              authenticates too (as with the API server's client CA) */
};

/* Counters of requests received (counted on arrival, before any delay or failure). */
enum apiserver_double_counter {
	APISERVER_DOUBLE_GET_NODE = 0,
	APISERVER_DOUBLE_GET_POD,
	APISERVER_DOUBLE_LIST_PODS, /* one per page */
	APISERVER_DOUBLE_WRITE,     /* POST / DELETE */
	APISERVER_DOUBLE_UNAUTHORIZED,
	APISERVER_DOUBLE_BAD_REQUEST,
	APISERVER_DOUBLE_LIST_NODES, /* one per page */
	APISERVER_DOUBLE_WATCH_PODS, /* watch requests (streams opened or refused) */
	APISERVER_DOUBLE_WATCH_NODES,
	APISERVER_DOUBLE_GET_LEASE,   /* GET requests of leases */
	APISERVER_DOUBLE_LEASE_WRITE, /* POST / PUT / DELETE requests of leases */
	/* Outcomes of lease writes, counted when the write is applied (under the lock, so a count
	 * read after a request's answer includes it): */
	APISERVER_DOUBLE_LEASE_CREATED,  /* 201: POST, or PUT of an absent lease */
	APISERVER_DOUBLE_LEASE_UPDATED,  /* 200 PUT that stored a new version (no-ops not) */
	APISERVER_DOUBLE_LEASE_CONFLICT, /* 409 Conflict / AlreadyExists answered (not injected) */
	APISERVER_DOUBLE_LEASE_DELETED,
	APISERVER_DOUBLE_LEASE_PUT_GONE, /* PUTs answered 404 by delete_lease_before_put */
	APISERVER_DOUBLE_LIST_POLICIES,  /* GPUMemoryPolicy lists (one per page) */
	APISERVER_DOUBLE_WATCH_POLICIES,
	APISERVER_DOUBLE_PATCH_POLICY_STATUS, /* PATCH .../gpumemorypolicies/NAME/status */
	APISERVER_DOUBLE_N_COUNTERS
};

/* Start on 127.0.0.1. NULL with a reason in err. */
struct apiserver_double *apiserver_double_new(const struct apiserver_double_opts *opts, char *err,
                                              size_t errlen);
/* Stop serving and free everything; NULL is a no-op. */
void apiserver_double_free(struct apiserver_double *d);

/* The port served (stable across stop/start). */
unsigned short apiserver_double_port(const struct apiserver_double *d);

/* Load a JSON file: kind Node, Pod, NodeList, PodList or List adds its objects; a file with
 * top-level "nodes" / "pods" arrays (a state file) adds those; any other kind (for example an
 * AdmissionReview) is skipped. Returns the number of objects added, or -1 with err. */
int apiserver_double_load_file(struct apiserver_double *d, const char *path, char *err,
                               size_t errlen);
/* Load every *.json file of a directory, as above. Objects added, or -1. */
int apiserver_double_load_dir(struct apiserver_double *d, const char *dir, char *err,
                              size_t errlen);

/* Add or replace a pod (JSON text); ns, when not NULL, overrides metadata.namespace. 0 / -1. */
int apiserver_double_put_pod(struct apiserver_double *d, const char *ns, const char *pod_json);
/* Add or replace a node (JSON text). 0 / -1. */
int apiserver_double_put_node(struct apiserver_double *d, const char *node_json);
/* Set spec.nodeName of pod ns/name (what a successful binding does). 0, or -1 if absent. */
int apiserver_double_bind(struct apiserver_double *d, const char *ns, const char *name,
                          const char *node);
/* Set status.phase of pod ns/name. 0 / -1. */
int apiserver_double_set_phase(struct apiserver_double *d, const char *ns, const char *name,
                               const char *phase);
/* Remove pod ns/name. 0 / -1. */
int apiserver_double_delete_pod(struct apiserver_double *d, const char *ns, const char *name);
/* Remove node name. 0 / -1. */
int apiserver_double_delete_node(struct apiserver_double *d, const char *name);
/* GPUMemoryPolicy objects (cluster-scoped), served as a list and a watch at
 * /apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies; stored as given (no validation: the
 * webhook's own must catch what the CRD's would). 0 or -1. */
int apiserver_double_put_policy(struct apiserver_double *d, const char *policy_json);
int apiserver_double_delete_policy(struct apiserver_double *d, const char *name);
/* The policy name as stored (JSON text, caller frees), or NULL when absent. */
char *apiserver_double_get_policy(struct apiserver_double *d, const char *name);
/* installed 0: that collection answers 404, as without the CRD (default installed). */
void apiserver_double_set_policy_crd(struct apiserver_double *d, int installed);
/* DRA (resource.k8s.io) is not served by the double: 404, as an API server without it. With
 * forbidden 1 its paths answer 403 Forbidden instead, as kube-apiserver answers a caller whose
 * RBAC lacks the resource (default 0). */
void apiserver_double_set_dra_forbidden(struct apiserver_double *d, int forbidden);
/* served 1: GET /apis/resource.k8s.io/v1/resourceslices and .../resourceclaims are served,
 * list (pagination as pods') and watch, cluster-wide only (no fieldSelector, no namespaced
 * path, no writes: the objects come from apiserver_double_put_dra). Default 0 (404). */
void apiserver_double_set_dra_served(struct apiserver_double *d, int served);
/* Add or replace a ResourceSlice or ResourceClaim (JSON text, by its kind; a claim keeps its
 * metadata.namespace), stored as given with a new resourceVersion; a watch sees ADDED or
 * MODIFIED. 0, or -1 (another kind, no name). */
int apiserver_double_put_dra(struct apiserver_double *d, const char *json);

/* Add or replace a lease (JSON text) in namespace ns (NULL: the object's, else "default"),
 * as the API server would have stored it: kind, apiVersion, metadata.uid and
 * creationTimestamp (when absent) filled in, a new resourceVersion. No validation: for
 * setting up state (a lease a crashed replica left). 0 / -1. */
int apiserver_double_put_lease(struct apiserver_double *d, const char *ns, const char *lease_json);
/* Remove lease ns/name. 0 / -1 (absent). */
int apiserver_double_delete_lease(struct apiserver_double *d, const char *ns, const char *name);
/* The lease ns/name as stored (JSON text, caller frees), or NULL when absent. */
char *apiserver_double_get_lease(struct apiserver_double *d, const char *ns, const char *name);
/* A copy of annotation key of lease ns/name (caller frees), or NULL when the lease or the
 * annotation is absent. */
char *apiserver_double_lease_annotation(struct apiserver_double *d, const char *ns,
                                        const char *name, const char *key);
/* The current resourceVersion (the last mutation's). */
unsigned long apiserver_double_resource_version(struct apiserver_double *d);

/* End every open watch stream now (cleanly: the client sees the stream end, as at its
 * timeoutSeconds). Watches opened afterwards are not affected. */
void apiserver_double_cut_watches(struct apiserver_double *d);
/* Drop the event history (etcd compaction): a watch from a version older than now gets the 410
 * ERROR event; so does an open stream that has not caught up; continue tokens of lists begun
 * before now answer 410 Expired. */
void apiserver_double_compact(struct apiserver_double *d);
/* Interval between bookmarks of a caught-up stream, ms (0 is taken as 1). Default 1000. */
void apiserver_double_set_bookmark_ms(struct apiserver_double *d, unsigned ms);
/* 1: every watch request answers HTTP 410 with a Status body; 0: off. */
void apiserver_double_set_watch_gone(struct apiserver_double *d, int on);
/* Watch streams currently open (opened and not yet torn down by the server). */
unsigned long apiserver_double_open_watches(struct apiserver_double *d);

/* Every API request answers http_code (>= 400) with a Status body; 0 turns it off. */
void apiserver_double_set_fail(struct apiserver_double *d, int http_code);
/* Every API answer is delayed by ms (0: off). */
void apiserver_double_set_delay_ms(struct apiserver_double *d, unsigned ms);
/* The next `times` lease writes (POST / PUT / DELETE, whatever their body) answer http_code
 * (400..599) without writing: 409 as the real one (POST: AlreadyExists, else Conflict with
 * the real message), others with their usual reason. Not counted as LEASE_CONFLICT. times 0
 * (or a code out of range): off. */
void apiserver_double_fail_lease_writes(struct apiserver_double *d, unsigned long times,
                                        int http_code);
/* TEST-DOUBLE FEATURE, not kube-apiserver's behaviour: the next `times` PUTs of a lease that
 * exists delete it first (as another client's DELETE landing between the writer's read and its
 * write; DELETED counted) and answer 404 NotFound `leases.coordination.k8s.io "NAME" not found`
 * (counted as LEASE_PUT_GONE). kube-apiserver v1.33 answers a PUT of an absent lease by
 * creating it (the lease strategy allows create on update: 201, as this double does without
 * this switch); a 404 there needs a server or strategy that does not, so this exists to drive a
 * client's 404 path for real. 0: off. */
void apiserver_double_delete_lease_before_put(struct apiserver_double *d, unsigned long times);
/* Each lease write waits ms before it is applied (its precondition is compared after the
 * wait, so what the writer read has more time to go stale); 0: off. */
void apiserver_double_set_lease_delay_ms(struct apiserver_double *d, unsigned ms);
/* The next `times` requests that present a continue token answer 410 Gone (token expired);
 * negative: all of them; 0: none. */
void apiserver_double_set_expire_continue(struct apiserver_double *d, int times);
/* Replace the bearer token the double requires (a rotated service-account token). */
void apiserver_double_set_token(struct apiserver_double *d, const char *token);

/* Down: close the port (connections refused; open watch streams end) / up again on the same
 * port. 0 / -1. */
int apiserver_double_stop(struct apiserver_double *d);
int apiserver_double_start(struct apiserver_double *d, char *err, size_t errlen);

unsigned long apiserver_double_count(struct apiserver_double *d, enum apiserver_double_counter c);
void apiserver_double_reset_counts(struct apiserver_double *d);
/* Wait until counter c reaches at least n; 0, or -1 after timeout_ms. */
int apiserver_double_wait_count(struct apiserver_double *d, enum apiserver_double_counter c,
                                unsigned long n, unsigned timeout_ms);
/* Copy of the query string parameters of the last list request ("fieldSelector", "limit"),
 * "" when none. */
void apiserver_double_last_list_query(struct apiserver_double *d, char *selector, size_t sel_len,
                                      char *limit, size_t limit_len);

#endif
