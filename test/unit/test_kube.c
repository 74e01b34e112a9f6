/*
 * Unit tests for lib/kube, driven against a tiny HTTP/1.1 server on a loopback port started
 * inside the test (plain http://; TLS is covered by the integration tests).
 */
#define _GNU_SOURCE /* vasprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kube.h"
#include "kubeconfig.h"

#define MAX_CONNS 64
#define MAX_REQS  256

/* What the server answers to request number n (0-based) for path. */
struct reply {
	int status;
	char *body; /* malloc'd, freed by the server */
	int hang;   /* never answer; wait for the client to go away */
	int stream; /* no Content-Length: body until the server closes */
	/* A watch: chunked, each part one chunk (malloc'd, freed by the server) after pause_ms;
	 * then the last chunk, or with hang_after, silence until the client goes away. */
	int chunked;
	char *parts[8];
	int nparts, pause_ms, hang_after;
};
typedef void (*handler_fn)(int n, const char *path, struct reply *r);

struct server {
	int lfd, port;
	pthread_t acceptor;
	pthread_mutex_t mu;
	int conn_fds[MAX_CONNS];
	pthread_t conn_threads[MAX_CONNS];
	int nconn; /* accepted connections */
	char paths[MAX_REQS][4096];
	char auth[MAX_REQS][256];
	char method[MAX_REQS][8];  /* "GET", "PATCH" */
	char ctype[MAX_REQS][128]; /* Content-Type, "" when none */
	int nreq;
	handler_fn handler;
	volatile int stopping;
	SSL_CTX *tls;     /* NULL: plain HTTP */
	int tls_failures; /* handshakes refused */
	char peer_cn[64]; /* CN of the last client certificate */
};

/* One accepted connection, plain or TLS. */
struct conn {
	int fd;
	SSL *ssl;
};

static struct server srv;

/* Observer counters. */
static struct {
	pthread_mutex_t mu;
	int calls;
	char verb[16], resource[64];
	long code;
	double seconds;
} obs;

static void observer(void *ctx, const char *verb, const char *resource, long code, double seconds)
{
	(void)ctx;
	pthread_mutex_lock(&obs.mu);
	obs.calls++;
	snprintf(obs.verb, sizeof(obs.verb), "%s", verb);
	snprintf(obs.resource, sizeof(obs.resource), "%s", resource);
	obs.code = code;
	obs.seconds = seconds;
	pthread_mutex_unlock(&obs.mu);
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *dupf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	assert_true(vasprintf(&s, fmt, ap) >= 0);
	va_end(ap);
	return s;
}

static ssize_t conn_recv(struct conn *c, char *buf, size_t n)
{
	if (c->ssl != NULL) {
		int r = SSL_read(c->ssl, buf, (int)n);
		return r > 0 ? r : (SSL_get_error(c->ssl, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1);
	}
	return recv(c->fd, buf, n, 0);
}

static int write_all(struct conn *c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w =
		    c->ssl != NULL ? SSL_write(c->ssl, p, (int)n) : send(c->fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read one request head (GET, no body) into buf. 0 on EOF/error. */
static size_t read_head(struct conn *c, char *buf, size_t cap)
{
	size_t len = 0;

	while (len + 1 < cap) {
		ssize_t r = conn_recv(c, buf + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		len += (size_t)r;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n") != NULL)
			return len;
	}
	return 0;
}

/* TLS handshake; records the client certificate's CN. -1 when refused. */
static int conn_accept_tls(struct conn *c)
{
	X509 *peer;

	c->ssl = SSL_new(srv.tls);
	if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1 || SSL_accept(c->ssl) != 1) {
		pthread_mutex_lock(&srv.mu);
		srv.tls_failures++;
		pthread_mutex_unlock(&srv.mu);
		ERR_clear_error();
		return -1;
	}
	peer = SSL_get1_peer_certificate(c->ssl);
	if (peer != NULL) {
		pthread_mutex_lock(&srv.mu);
		X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, srv.peer_cn,
		                          sizeof(srv.peer_cn));
		pthread_mutex_unlock(&srv.mu);
		X509_free(peer);
	}
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A streamed (chunked) answer, as the API server writes a watch. */
static void serve_chunked(struct conn *conn, struct reply *r, char *buf, size_t cap)
{
	char *head = dupf("HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	                  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
	                  r->status);
	int bad = write_all(conn, head, strlen(head)) < 0;

	free(head);
	for (int i = 0; i < r->nparts; i++) {
		char *chunk = dupf("%zx\r\n%s\r\n", strlen(r->parts[i]), r->parts[i]);
		sleep_ms(r->pause_ms);
		if (!bad && strlen(r->parts[i]) > 0)
			bad = write_all(conn, chunk, strlen(chunk)) < 0;
		free(chunk);
		free(r->parts[i]);
	}
	if (r->hang_after) {
		while (conn_recv(conn, buf, cap) > 0)
			;
		return;
	}
	if (!bad)
		(void)write_all(conn, "0\r\n\r\n", 5);
	if (conn->ssl != NULL)
		SSL_shutdown(conn->ssl);
	shutdown(conn->fd, SHUT_WR);
}

static void serve_conn(struct conn *conn)
{
	char buf[16384];

	while (read_head(conn, buf, sizeof(buf)) > 0) {
		struct reply r = {.status = 200};
		char path[4096] = "", auth[256] = "", method[8] = "", ctype[128] = "", *line,
		     *save = NULL;
		int n;

		/* A PATCH's body is left unread: only as a connection's last request. */
		for (line = strtok_r(buf, "\r\n", &save); line;
		     line = strtok_r(NULL, "\r\n", &save)) {
			if (strncmp(line, "GET ", 4) == 0 || strncmp(line, "PATCH ", 6) == 0)
				sscanf(line, "%7s %4095s", method, path);
			else if (strncasecmp(line, "Authorization: ", 15) == 0)
				snprintf(auth, sizeof(auth), "%s", line + 15);
			else if (strncasecmp(line, "Content-Type: ", 14) == 0)
				snprintf(ctype, sizeof(ctype), "%s", line + 14);
		}
		pthread_mutex_lock(&srv.mu);
		n = srv.nreq;
		if (n < MAX_REQS) {
			snprintf(srv.paths[n], sizeof(srv.paths[n]), "%s", path);
			snprintf(srv.auth[n], sizeof(srv.auth[n]), "%s", auth);
			snprintf(srv.method[n], sizeof(srv.method[n]), "%s", method);
			snprintf(srv.ctype[n], sizeof(srv.ctype[n]), "%s", ctype);
			srv.nreq++;
		}
		pthread_mutex_unlock(&srv.mu);
		srv.handler(n, path, &r);
		if (r.hang) {
			/* Wait until the client gives up (EOF) or the server stops. */
			while (conn_recv(conn, buf, sizeof(buf)) > 0)
				;
			free(r.body);
			break;
		}
		const char *body = r.body ? r.body : "";
		if (r.chunked) {
			serve_chunked(conn, &r, buf, sizeof(buf));
			free(r.body);
			break;
		}
		if (r.stream) {
			char *head = dupf("HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
			                  "Connection: close\r\n\r\n",
			                  r.status);
			(void)(write_all(conn, head, strlen(head)) == 0 &&
			       write_all(conn, body, strlen(body)) == 0);
			if (conn->ssl != NULL)
				SSL_shutdown(conn->ssl);
			shutdown(conn->fd, SHUT_WR);
			free(head);
			free(r.body);
			break;
		}
		/* One send: head and body in two would meet Nagle and delayed ACK (40 ms). */
		char *resp = dupf("HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
		                  "Content-Length: %zu\r\n\r\n%s",
		                  r.status, strlen(body), body);
		int bad = write_all(conn, resp, strlen(resp)) < 0;
		free(resp);
		free(r.body);
		if (bad)
			break;
	}
}

static void *conn_main(void *arg)
{
	struct conn conn = {(int)(intptr_t)arg, NULL};

	if (srv.tls == NULL || conn_accept_tls(&conn) == 0)
		serve_conn(&conn);
	SSL_free(conn.ssl); /* the fd is closed by server_stop */
	return NULL;
}

static void *accept_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(srv.lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			return NULL; /* shut down */
		}
		pthread_mutex_lock(&srv.mu);
		if (srv.stopping || srv.nconn >= MAX_CONNS) {
			pthread_mutex_unlock(&srv.mu);
			close(fd);
			continue;
		}
		srv.conn_fds[srv.nconn] = fd;
		assert_int_equal(pthread_create(&srv.conn_threads[srv.nconn], NULL, conn_main,
		                                (void *)(intptr_t)fd),
		                 0);
		srv.nconn++;
		pthread_mutex_unlock(&srv.mu);
	}
}

static void server_start_tls(handler_fn h, SSL_CTX *tls)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	int one = 1;

	memset(&srv, 0, sizeof(srv));
	pthread_mutex_init(&srv.mu, NULL);
	srv.handler = h;
	srv.tls = tls;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(srv.lfd >= 0);
	setsockopt(srv.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(srv.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(srv.lfd, 64), 0);
	assert_int_equal(getsockname(srv.lfd, (struct sockaddr *)&a, &alen), 0);
	srv.port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&srv.acceptor, NULL, accept_main, NULL), 0);
}

static void server_start(handler_fn h)
{
	server_start_tls(h, NULL);
}

static void server_stop(void)
{
	pthread_mutex_lock(&srv.mu);
	srv.stopping = 1;
	pthread_mutex_unlock(&srv.mu);
	shutdown(srv.lfd, SHUT_RDWR); /* wakes accept() */
	pthread_join(srv.acceptor, NULL);
	close(srv.lfd);
	for (int i = 0; i < srv.nconn; i++) {
		shutdown(srv.conn_fds[i], SHUT_RDWR);
		pthread_join(srv.conn_threads[i], NULL);
		close(srv.conn_fds[i]);
	}
	pthread_mutex_destroy(&srv.mu);
}

static struct kube_client *client(const char *token, const char *token_file, long timeout_ms)
{
	char url[64], err[256] = "";
	struct kube_config cfg;
	struct kube_client *c;

	memset(&cfg, 0, sizeof(cfg));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", srv.port);
	cfg.server = url;
	cfg.token = (char *)token;
	cfg.token_file = (char *)token_file;
	c = kube_client_new(&cfg, timeout_ms, observer, NULL, err, sizeof(err));
	if (c == NULL)
		fail_msg("kube_client_new: %s", err);
	return c;
}

static int setup(void **state)
{
	(void)state;
	pthread_mutex_lock(&obs.mu);
	obs.calls = 0;
	obs.code = -1;
	pthread_mutex_unlock(&obs.mu);
	return 0;
}

/* ---- handlers ---- */

static void h_pod(int n, const char *path, struct reply *r)
{
	(void)n;
	if (strncmp(path, "/api/v1/nodes/", 14) == 0)
		r->body = dupf("{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-node-a\"}}");
	else
		r->body = dupf("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}");
}

static void h_404(int n, const char *path, struct reply *r)
{
	(void)n;
	(void)path;
	r->status = 404;
	r->body = dupf("{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods \\\"p\\\" "
	               "not found\",\"reason\":\"NotFound\",\"code\":404}");
}

static void h_500(int n, const char *path, struct reply *r)
{
	(void)n;
	(void)path;
	r->status = 500;
	r->body = dupf("{\"kind\":\"Status\",\"message\":\"etcdserver: request timed out\","
	               "\"code\":500}");
}

static void h_401_text(int n, const char *path, struct reply *r)
{
	(void)n;
	(void)path;
	r->status = 401;
	r->body = dupf("Unauthorized\n");
}

static void h_not_json(int n, const char *path, struct reply *r)
{
	(void)path;
	r->body = dupf(n == 0 ? "<html>proxy</html>" : "[1,2]");
}

static void h_hang(int n, const char *path, struct reply *r)
{
	(void)n;
	(void)path;
	r->hang = 1;
}

static void h_big(int n, const char *path, struct reply *r)
{
	size_t len = 8192;
	char *b = malloc(len + 1);

	(void)n;
	(void)path;
	assert_non_null(b);
	memset(b, ' ', len);
	b[0] = '{';
	b[len - 1] = '}';
	b[len] = '\0';
	r->body = b;
	r->stream = n > 0; /* the first with Content-Length, then streamed */
}

/* Three pages; continue tokens with characters that need escaping. */
static void h_pages(int n, const char *path, struct reply *r)
{
	(void)n;
	if (strstr(path, "continue=") == NULL)
		r->body = dupf("{\"kind\":\"PodList\",\"metadata\":{\"continue\":\"tok/1+=&\"},"
		               "\"items\":[{\"metadata\":{\"name\":\"a\"}},"
		               "{\"metadata\":{\"name\":\"b\"}}]}");
	else if (strstr(path, "continue=tok%2F1%2B%3D%26") != NULL)
		r->body = dupf("{\"kind\":\"PodList\",\"metadata\":{\"continue\":\"tok 2\"},"
		               "\"items\":[{\"metadata\":{\"name\":\"c\"}}]}");
	else if (strstr(path, "continue=tok%202") != NULL)
		r->body = dupf("{\"kind\":\"PodList\",\"metadata\":{\"continue\":\"\"},"
		               "\"items\":[{\"metadata\":{\"name\":\"d\"}}]}");
	else
		r->status = 400;
}

/* Page 2 answers 410 Gone once (expired continue token), then works. */
static void h_gone_once(int n, const char *path, struct reply *r)
{
	if (strstr(path, "continue=") == NULL) {
		r->body = dupf("{\"metadata\":{\"continue\":\"t1\"},"
		               "\"items\":[{\"metadata\":{\"name\":\"a\"}}]}");
	} else if (n == 1) {
		r->status = 410;
		r->body = dupf("{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"The "
		               "provided continue parameter is too old\",\"code\":410}");
	} else {
		r->body = dupf("{\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"b\"}}]}");
	}
}

static void h_gone_always(int n, const char *path, struct reply *r)
{
	(void)n;
	if (strstr(path, "continue=") == NULL) {
		r->body = dupf("{\"metadata\":{\"continue\":\"t1\"},\"items\":[]}");
	} else {
		r->status = 410;
		r->body = dupf("{\"kind\":\"Status\",\"message\":\"too old\",\"code\":410}");
	}
}

static void h_endless(int n, const char *path, struct reply *r)
{
	(void)path;
	r->body = dupf("{\"metadata\":{\"continue\":\"t%d\"},\"items\":null}", n);
}

static void h_auth_echo(int n, const char *path, struct reply *r)
{
	(void)n;
	(void)path;
	r->body = dupf("{}");
}

/* ---- tests ---- */

static void test_get_pod_escapes_and_observes(void **state)
{
	struct kube_client *c;
	cJSON *pod = NULL;
	long code = -1;
	char err[256] = "";

	(void)state;
	server_start(h_pod);
	c = client("static-token", NULL, 2000);
	assert_int_equal(kube_get_pod(c, "team a", "p%1/x", &pod, &code, err, sizeof(err)), 0);
	assert_int_equal(code, 200);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(pod, "kind")->valuestring, "Pod");
	cJSON_Delete(pod);
	assert_string_equal(srv.paths[0], "/api/v1/namespaces/team%20a/pods/p%251%2Fx");
	assert_string_equal(srv.auth[0], "Bearer static-token");
	assert_int_equal(obs.calls, 1);
	assert_string_equal(obs.verb, "get");
	assert_string_equal(obs.resource, "pods");
	assert_int_equal(obs.code, 200);
	assert_true(obs.seconds >= 0 && obs.seconds < 10);

	cJSON *node = NULL;
	assert_int_equal(kube_get_node(c, "gpu-node-a", &node, NULL, err, sizeof(err)), 0);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(node, "kind")->valuestring, "Node");
	cJSON_Delete(node);
	assert_string_equal(srv.paths[1], "/api/v1/nodes/gpu-node-a");
	assert_string_equal(obs.resource, "nodes");
	/* Two calls on one thread: one connection, kept alive. */
	assert_int_equal(srv.nconn, 1);
	kube_client_free(c);
	server_stop();
}

static void test_not_found(void **state)
{
	struct kube_client *c;
	cJSON *pod = (cJSON *)0x1;
	long code = 0;
	char err[256] = "";

	(void)state;
	server_start(h_404);
	c = client(NULL, NULL, 2000);
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), KUBE_ENOTFOUND);
	assert_null(pod);
	assert_int_equal(code, 404);
	assert_non_null(strstr(err, "404"));
	assert_non_null(strstr(err, "pods \"p\" not found"));
	assert_string_equal(srv.auth[0], ""); /* no credentials configured: none sent */
	assert_int_equal(obs.code, 404);
	kube_client_free(c);
	server_stop();
}

static void test_server_error_status_message(void **state)
{
	struct kube_client *c;
	cJSON *items = NULL;
	long code = 0;
	char err[256] = "";

	(void)state;
	server_start(h_500);
	c = client(NULL, NULL, 2000);
	assert_int_equal(kube_list_pods_on_node(c, "n1", &items, &code, err, sizeof(err)),
	                 KUBE_EHTTP);
	assert_null(items);
	assert_int_equal(code, 500);
	assert_non_null(strstr(err, "HTTP 500"));
	assert_non_null(strstr(err, "etcdserver: request timed out"));
	assert_non_null(strstr(err, "n1"));
	kube_client_free(c);
	server_stop();

	/* A non-JSON error body is quoted as text; an HTTP error is not a transport error. */
	server_start(h_401_text);
	c = client("bad", NULL, 2000);
	cJSON *pod = NULL;
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), KUBE_EHTTP);
	assert_int_equal(code, 401);
	assert_non_null(strstr(err, "Unauthorized"));
	assert_null(strchr(err, '\n'));
	kube_client_free(c);
	server_stop();
}

static void test_not_json(void **state)
{
	struct kube_client *c;
	cJSON *pod = NULL;
	long code = 0;
	char err[256] = "";

	(void)state;
	server_start(h_not_json);
	c = client(NULL, NULL, 2000);
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), KUBE_EPARSE);
	assert_int_equal(code, 200);
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), KUBE_EPARSE);
	assert_null(pod);
	kube_client_free(c);
	server_stop();
}

static void test_pagination_with_continue(void **state)
{
	struct kube_client *c;
	cJSON *items = NULL;
	long code = 0;
	char err[256] = "";
	const char *names[] = {"a", "b", "c", "d"};
	int i = 0;
	const cJSON *it;

	(void)state;
	server_start(h_pages);
	c = client("t", NULL, 2000);
	if (kube_list_pods_on_node(c, "gpu-node-a", &items, &code, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(code, 200);
	assert_true(cJSON_IsArray(items));
	assert_int_equal(cJSON_GetArraySize(items), 4);
	cJSON_ArrayForEach(it, items)
	{
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "metadata");
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(m, "name")->valuestring,
		                    names[i++]);
	}
	cJSON_Delete(items);
	assert_int_equal(srv.nreq, 3);
	assert_string_equal(srv.paths[0],
	                    "/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3Dgpu-node-a%2C"
	                    "status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed");
	assert_non_null(strstr(srv.paths[1], "&continue=tok%2F1%2B%3D%26"));
	assert_non_null(strstr(srv.paths[1], "limit=500"));
	assert_non_null(strstr(srv.paths[2], "&continue=tok%202"));
	assert_int_equal(obs.calls, 3);
	assert_string_equal(obs.verb, "list");
	assert_int_equal(srv.nconn, 1);
	kube_client_free(c);
	server_stop();
}

static void test_gone_restarts_once(void **state)
{
	struct kube_client *c;
	cJSON *items = NULL;
	long code = 0;
	char err[256] = "";

	(void)state;
	server_start(h_gone_once);
	c = client(NULL, NULL, 2000);
	if (kube_list_pods_on_node(c, "n", &items, &code, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	/* page1, page2 (410), page1 again, page2: nothing counted twice. */
	assert_int_equal(srv.nreq, 4);
	assert_int_equal(cJSON_GetArraySize(items), 2);
	cJSON_Delete(items);
	kube_client_free(c);
	server_stop();

	server_start(h_gone_always);
	c = client(NULL, NULL, 2000);
	assert_int_equal(kube_list_pods_on_node(c, "n", &items, &code, err, sizeof(err)),
	                 KUBE_EHTTP);
	assert_int_equal(code, 410);
	assert_int_equal(srv.nreq, 4);
	assert_non_null(strstr(err, "too old"));
	assert_null(items);
	kube_client_free(c);
	server_stop();
}

static void test_page_cap(void **state)
{
	struct kube_client *c;
	cJSON *items = NULL;
	char err[256] = "";

	(void)state;
	server_start(h_endless);
	c = client(NULL, NULL, 10000);
	assert_int_equal(kube_list_pods_on_node(c, "n", &items, NULL, err, sizeof(err)),
	                 KUBE_ETOOBIG);
	assert_int_equal(srv.nreq, KUBE_MAX_PAGES);
	assert_null(items);
	kube_client_free(c);
	server_stop();
}

static void test_body_cap(void **state)
{
	struct kube_client *c;
	cJSON *pod = NULL, *items = NULL;
	long code = 0;
	char err[256] = "";

	(void)state;
	server_start(h_big);
	c = client(NULL, NULL, 2000);
	kube_client_set_body_max(c, 1024);
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), KUBE_ETOOBIG);
	assert_null(pod);
	assert_non_null(strstr(err, "1024"));
	/* Without Content-Length the write callback stops the transfer at the cap. */
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), KUBE_ETOOBIG);
	assert_null(pod);
	/* Within the cap it parses. */
	kube_client_set_body_max(c, 8192);
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), 0);
	cJSON_Delete(pod);
	kube_client_free(c);
	server_stop();

	/* Pages share the cap: pages of ~45 bytes add up past a 500-byte cap. */
	server_start(h_endless);
	c = client(NULL, NULL, 2000);
	kube_client_set_body_max(c, 500);
	assert_int_equal(kube_list_pods_on_node(c, "n", &items, NULL, err, sizeof(err)),
	                 KUBE_ETOOBIG);
	assert_true(srv.nreq < 20);
	kube_client_free(c);
	server_stop();
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_timeout_server_never_answers(void **state)
{
	struct kube_client *c;
	cJSON *pod = NULL, *items = NULL;
	long code = -1;
	char err[256] = "";
	double t0;

	(void)state;
	server_start(h_hang);
	c = client(NULL, NULL, 300);
	t0 = now();
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)), KUBE_ETIMEOUT);
	assert_true(now() - t0 < 3.0);
	assert_int_equal(code, 0);
	assert_int_equal(obs.code, 0);
	assert_non_null(strstr(err, "300 ms"));
	t0 = now();
	assert_int_equal(kube_list_pods_on_node(c, "n", &items, &code, err, sizeof(err)),
	                 KUBE_ETIMEOUT);
	assert_true(now() - t0 < 3.0);
	kube_client_free(c);
	server_stop();
}

static void test_transport_error(void **state)
{
	struct kube_client *c;
	cJSON *pod = NULL;
	long code = -1;
	char err[256] = "";
	int port;

	(void)state;
	/* Find a free port, then stop listening on it. */
	server_start(h_pod);
	port = srv.port;
	server_stop();
	srv.port = port;
	c = client(NULL, NULL, 2000);
	assert_int_equal(kube_get_pod(c, "ns", "p", &pod, &code, err, sizeof(err)),
	                 KUBE_ETRANSPORT);
	assert_int_equal(code, 0);
	assert_true(strlen(err) > 0);
	assert_int_equal(obs.code, 0);
	kube_client_free(c);
}

static void test_invalid_arguments(void **state)
{
	struct kube_client *c;
	cJSON *obj = NULL;
	char err[256] = "", longname[300];

	(void)state;
	server_start(h_pod);
	c = client(NULL, NULL, 2000);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(kube_get_pod(c, "", "p", &obj, NULL, err, sizeof(err)), KUBE_EINVAL);
	assert_int_equal(kube_get_pod(c, "ns", NULL, &obj, NULL, err, sizeof(err)), KUBE_EINVAL);
	assert_int_equal(kube_get_node(c, longname, &obj, NULL, err, sizeof(err)), KUBE_EINVAL);
	assert_int_equal(kube_list_pods_on_node(c, "", &obj, NULL, err, sizeof(err)), KUBE_EINVAL);
	/* dot segments would address another object (".../pods/." is the pod list) */
	assert_int_equal(kube_get_pod(c, "t", ".", &obj, NULL, err, sizeof(err)), KUBE_EINVAL);
	assert_non_null(strstr(err, "\".\" is not a valid name"));
	assert_int_equal(kube_get_pod(c, "..", "p", &obj, NULL, err, sizeof(err)), KUBE_EINVAL);
	assert_int_equal(kube_get_node(c, "..", &obj, NULL, err, sizeof(err)), KUBE_EINVAL);
	assert_int_equal(srv.nreq, 0);
	assert_string_equal(kube_strerror(KUBE_EINVAL), "invalid argument");
	assert_string_equal(kube_strerror(KUBE_ETIMEOUT), "timeout");
	kube_client_free(c);
	kube_client_free(NULL);
	server_stop();

	struct kube_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	assert_null(kube_client_new(&cfg, 1000, NULL, NULL, err, sizeof(err)));
	cfg.server = "http://x";
	assert_null(kube_client_new(&cfg, 0, NULL, NULL, err, sizeof(err)));
}

/* PATCH of a status subresource: the path (name escaped), the method, the merge-patch media
 * type, the observer's verb and bounded resource label; bad arguments make no request. */
static void test_patch_status(void **state)
{
	static const char res[] = "gpu-memory-guard.io/v1alpha1/gpumemorypolicies";
	struct kube_client *c;
	cJSON *patch = cJSON_Parse("{\"status\":{\"observedGeneration\":1}}"), *arr;
	long code = -1;
	char err[256] = "";

	(void)state;
	server_start(h_auth_echo);
	c = client("static-token", NULL, 2000);
	arr = cJSON_CreateArray();
	assert_int_equal(kube_patch_status(c, "Bad", "p", patch, &code, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(kube_patch_status(c, res, ".", patch, &code, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(kube_patch_status(c, res, "p", arr, &code, err, sizeof(err)), KUBE_EINVAL);
	assert_int_equal(srv.nreq, 0);
	assert_int_equal(kube_patch_status(c, res, "p 1", patch, &code, err, sizeof(err)), 0);
	assert_int_equal(code, 200);
	assert_string_equal(srv.method[0], "PATCH");
	assert_string_equal(srv.paths[0],
	                    "/apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies/p%201/status");
	assert_string_equal(srv.ctype[0], "application/merge-patch+json");
	assert_string_equal(srv.auth[0], "Bearer static-token");
	assert_string_equal(obs.verb, "patch");
	assert_string_equal(obs.resource, "gpumemorypolicies");
	cJSON_Delete(patch);
	cJSON_Delete(arr);
	kube_client_free(c);
	server_stop();
}

static void write_token(const char *path, const char *tok, time_t mtime)
{
	FILE *f = fopen(path, "w");
	struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};

	assert_non_null(f);
	fprintf(f, "%s\n", tok);
	fclose(f);
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void test_token_file_reread(void **state)
{
	char path[] = "/tmp/gmg-token-XXXXXX";
	struct kube_client *c;
	cJSON *obj = NULL;
	char err[256] = "";
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_token(path, "tok-1", 1000000);
	server_start(h_auth_echo);
	c = client(NULL, path, 2000);
	assert_int_equal(kube_get_node(c, "n", &obj, NULL, err, sizeof(err)), 0);
	cJSON_Delete(obj);
	assert_string_equal(srv.auth[0], "Bearer tok-1");
	/* Rotated by the kubelet: new content, new mtime. */
	write_token(path, "tok-2-longer", 1000100);
	assert_int_equal(kube_get_node(c, "n", &obj, NULL, err, sizeof(err)), 0);
	cJSON_Delete(obj);
	assert_string_equal(srv.auth[1], "Bearer tok-2-longer");
	/* Same size, same content length, only mtime changes: still re-read. */
	write_token(path, "tok-3-longer", 1000200);
	assert_int_equal(kube_get_node(c, "n", &obj, NULL, err, sizeof(err)), 0);
	cJSON_Delete(obj);
	assert_string_equal(srv.auth[2], "Bearer tok-3-longer");
	/* Token file gone: fail, do not send a stale or empty token. */
	unlink(path);
	assert_int_equal(kube_get_node(c, "n", &obj, NULL, err, sizeof(err)), KUBE_ETRANSPORT);
	assert_non_null(strstr(err, path));
	assert_int_equal(srv.nreq, 3);
	kube_client_free(c);
	server_stop();
}

/* Threads: each gets its own handle; one stays alive across kube_client_free. */
struct worker {
	struct kube_client *c;
	int rc;
	pthread_mutex_t *mu;
	pthread_cond_t *cv;
	int *done_calls, *release;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char err[256];

	for (int i = 0; i < 5 && w->rc == 0; i++) {
		cJSON *pod = NULL;
		w->rc = kube_get_pod(w->c, "ns", "p", &pod, NULL, err, sizeof(err));
		cJSON_Delete(pod);
	}
	if (w->mu != NULL) {
		pthread_mutex_lock(w->mu);
		(*w->done_calls)++;
		pthread_cond_broadcast(w->cv);
		while (!*w->release)
			pthread_cond_wait(w->cv, w->mu);
		pthread_mutex_unlock(w->mu);
	}
	return NULL;
}

static void test_threads_own_handles(void **state)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	int done_calls = 0, release = 0;
	struct worker w[4];
	pthread_t t[4];
	struct kube_client *c;

	(void)state;
	server_start(h_pod);
	c = client("t", NULL, 2000);
	/* Two threads run and exit (handles freed by the key destructor). */
	for (int i = 0; i < 2; i++) {
		w[i] = (struct worker){c, 0, NULL, NULL, NULL, NULL};
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].rc, 0);
	}
	/* Two more stay alive past kube_client_free (handles freed by the registry). */
	for (int i = 2; i < 4; i++) {
		w[i] = (struct worker){c, 0, &mu, &cv, &done_calls, &release};
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	pthread_mutex_lock(&mu);
	while (done_calls < 2)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	assert_int_equal(w[2].rc, 0);
	assert_int_equal(w[3].rc, 0);
	assert_int_equal(srv.nreq, 20);
	assert_int_equal(srv.nconn, 4); /* one connection per thread, reused 5 times */
	kube_client_free(c);
	pthread_mutex_lock(&mu);
	release = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 2; i < 4; i++)
		pthread_join(t[i], NULL);
	server_stop();
}

/* ---- TLS: certificates made in-process, the server above wrapped in OpenSSL ---- */

struct pki {
	EVP_PKEY *ca_key, *srv_key, *cli_key, *other_key;
	X509 *ca, *srv, *cli, *other_ca;
	char *ca_pem, *cli_pem, *cli_key_pem, *other_ca_pem;
};

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	assert_non_null(ext);
	assert_int_equal(X509_add_ext(x, ext, -1), 1);
	X509_EXTENSION_free(ext);
}

/* A certificate for key named cn, signed by issuer (NULL: self-signed CA). eku: "serverAuth",
 * "clientAuth" or NULL for a CA. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                       const char *eku)
{
	static long serial = 1;
	X509 *x = X509_new();
	X509_NAME *name;

	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, key);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
	if (eku == NULL) {
		add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
		add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE");
		add_ext(x, issuer, NID_key_usage, "critical,digitalSignature");
		add_ext(x, issuer, NID_ext_key_usage, eku);
		if (strcmp(eku, "serverAuth") == 0)
			add_ext(x, issuer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
	}
	assert_true(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0);
	return x;
}

static char *pem_of(X509 *x, EVP_PKEY *k)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out;
	long n;

	assert_non_null(b);
	if (x != NULL)
		assert_int_equal(PEM_write_bio_X509(b, x), 1);
	else
		assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL), 1);
	n = BIO_get_mem_data(b, &data);
	out = malloc((size_t)n + 1);
	assert_non_null(out);
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	BIO_free(b);
	return out;
}

static struct pki pki;

static int pki_setup(void **state)
{
	(void)state;
	pki.ca_key = EVP_EC_gen("P-256");
	pki.srv_key = EVP_EC_gen("P-256");
	pki.cli_key = EVP_EC_gen("P-256");
	pki.other_key = EVP_EC_gen("P-256");
	assert_true(pki.ca_key && pki.srv_key && pki.cli_key && pki.other_key);
	pki.ca = make_cert(pki.ca_key, "test-ca", NULL, NULL, NULL);
	pki.other_ca = make_cert(pki.other_key, "other-ca", NULL, NULL, NULL);
	pki.srv = make_cert(pki.srv_key, "apiserver", pki.ca, pki.ca_key, "serverAuth");
	pki.cli = make_cert(pki.cli_key, "gmg-client", pki.ca, pki.ca_key, "clientAuth");
	pki.ca_pem = pem_of(pki.ca, NULL);
	pki.other_ca_pem = pem_of(pki.other_ca, NULL);
	pki.cli_pem = pem_of(pki.cli, NULL);
	pki.cli_key_pem = pem_of(NULL, pki.cli_key);
	return 0;
}

static int pki_teardown(void **state)
{
	(void)state;
	X509_free(pki.ca);
	X509_free(pki.other_ca);
	X509_free(pki.srv);
	X509_free(pki.cli);
	EVP_PKEY_free(pki.ca_key);
	EVP_PKEY_free(pki.srv_key);
	EVP_PKEY_free(pki.cli_key);
	EVP_PKEY_free(pki.other_key);
	free(pki.ca_pem);
	free(pki.other_ca_pem);
	free(pki.cli_pem);
	free(pki.cli_key_pem);
	return 0;
}

/* A server context; require_client: verify client certificates against the CA. */
static SSL_CTX *server_ctx(int require_client)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	assert_non_null(ctx);
	assert_int_equal(SSL_CTX_use_certificate(ctx, pki.srv), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(ctx, pki.srv_key), 1);
	if (require_client) {
		assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), pki.ca), 1);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return ctx;
}

static struct kube_client *tls_client(struct kube_config *cfg)
{
	char url[64], err[256] = "";
	struct kube_client *c;

	snprintf(url, sizeof(url), "https://127.0.0.1:%d", srv.port);
	cfg->server = url;
	c = kube_client_new(cfg, 3000, observer, NULL, err, sizeof(err));
	if (c == NULL)
		fail_msg("kube_client_new: %s", err);
	return c;
}

static void test_tls_blobs_and_client_cert(void **state)
{
	SSL_CTX *ctx = server_ctx(1);
	struct kube_config cfg = {0};
	struct kube_client *c;
	cJSON *node = NULL;
	long code = 0;
	char err[256] = "";

	(void)state;
	server_start_tls(h_pod, ctx);
	cfg.ca_data = pki.ca_pem;
	cfg.ca_data_len = strlen(pki.ca_pem);
	cfg.client_cert_data = pki.cli_pem;
	cfg.client_cert_data_len = strlen(pki.cli_pem);
	cfg.client_key_data = pki.cli_key_pem;
	cfg.client_key_data_len = strlen(pki.cli_key_pem);
	cfg.token = "tls-token";
	c = tls_client(&cfg);
	if (kube_get_node(c, "gpu-node-a", &node, &code, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(code, 200);
	cJSON_Delete(node);
	assert_string_equal(srv.peer_cn, "gmg-client");
	assert_string_equal(srv.auth[0], "Bearer tls-token");
	assert_int_equal(srv.tls_failures, 0);
	kube_client_free(c);
	server_stop();
	SSL_CTX_free(ctx);
}

static void write_pem(const char *path, const char *pem)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(pem, f) >= 0, 1);
	fclose(f);
}

static void test_tls_files(void **state)
{
	char dir[] = "/tmp/gmg-kube-tls-XXXXXX", ca[64], crt[64], key[64];
	SSL_CTX *ctx = server_ctx(1);
	struct kube_config cfg = {0};
	struct kube_client *c;
	cJSON *node = NULL;
	char err[256] = "";

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	snprintf(crt, sizeof(crt), "%s/client.crt", dir);
	snprintf(key, sizeof(key), "%s/client.key", dir);
	write_pem(ca, pki.ca_pem);
	write_pem(crt, pki.cli_pem);
	write_pem(key, pki.cli_key_pem);
	server_start_tls(h_pod, ctx);
	cfg.ca_file = ca;
	cfg.client_cert_file = crt;
	cfg.client_key_file = key;
	c = tls_client(&cfg);
	if (kube_get_node(c, "n", &node, NULL, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	cJSON_Delete(node);
	assert_string_equal(srv.peer_cn, "gmg-client");
	kube_client_free(c);
	server_stop();
	SSL_CTX_free(ctx);
	unlink(ca);
	unlink(crt);
	unlink(key);
	rmdir(dir);
}

static void test_tls_refusals(void **state)
{
	SSL_CTX *ctx = server_ctx(1);
	struct kube_config cfg = {0};
	struct kube_client *c;
	cJSON *node = NULL;
	long code = -1;
	char err[256] = "";

	(void)state;
	server_start_tls(h_pod, ctx);
	/* Server signed by a CA we do not trust. */
	cfg.ca_data = pki.other_ca_pem;
	cfg.ca_data_len = strlen(pki.other_ca_pem);
	cfg.client_cert_data = pki.cli_pem;
	cfg.client_cert_data_len = strlen(pki.cli_pem);
	cfg.client_key_data = pki.cli_key_pem;
	cfg.client_key_data_len = strlen(pki.cli_key_pem);
	c = tls_client(&cfg);
	assert_int_equal(kube_get_node(c, "n", &node, &code, err, sizeof(err)), KUBE_ETRANSPORT);
	assert_int_equal(code, 0);
	assert_true(strlen(err) > 0);
	kube_client_free(c);

	/* insecure-skip-tls-verify accepts it. */
	cfg.insecure_skip_tls_verify = 1;
	c = tls_client(&cfg);
	assert_int_equal(kube_get_node(c, "n", &node, &code, err, sizeof(err)), 0);
	cJSON_Delete(node);
	kube_client_free(c);

	/* Trusted server, but no client certificate where one is required. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.ca_data = pki.ca_pem;
	cfg.ca_data_len = strlen(pki.ca_pem);
	c = tls_client(&cfg);
	assert_int_equal(kube_get_node(c, "n", &node, &code, err, sizeof(err)), KUBE_ETRANSPORT);
	assert_null(node);
	kube_client_free(c);
	server_stop();
	SSL_CTX_free(ctx);
	assert_true(srv.tls_failures >= 2);
}

/* ---- kube_list_all ---- */

struct items_seen {
	int n;
	char names[16][32];
	int stop_at; /* nonzero: stop on that item (1-based) */
};

static int on_item(void *ctx, const struct cJSON *item)
{
	struct items_seen *s = ctx;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(item, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");

	assert_true(s->n < 16);
	snprintf(s->names[s->n], sizeof(s->names[s->n]), "%s",
	         cJSON_IsString(name) ? name->valuestring : "?");
	s->n++;
	return s->stop_at != 0 && s->n == s->stop_at;
}

/* Nodes in three pages; the first page's resourceVersion is the list's. */
static void h_nodes_pages(int n, const char *path, struct reply *r)
{
	(void)n;
	if (strncmp(path, "/api/v1/nodes?limit=2", 21) != 0)
		r->status = 400;
	else if (strstr(path, "continue=") == NULL)
		r->body = dupf("{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"100\","
		               "\"continue\":\"c/1\"},\"items\":[{\"metadata\":{\"name\":\"n1\"}},"
		               "{\"metadata\":{\"name\":\"n2\"}}]}");
	else if (strstr(path, "continue=c%2F1") != NULL)
		r->body = dupf("{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"100\","
		               "\"continue\":\"c2\"},\"items\":[{\"metadata\":{\"name\":\"n3\"}},"
		               "{\"metadata\":{\"name\":\"n4\"}}]}");
	else if (strstr(path, "continue=c2") != NULL)
		r->body = dupf("{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"104\"},"
		               "\"items\":[{\"metadata\":{\"name\":\"n5\"}}]}");
	else
		r->status = 400;
}

static void test_list_all_pages(void **state)
{
	struct kube_client *c;
	struct items_seen s = {0};
	char rv[KUBE_RV_MAX] = "x", err[256] = "";
	long code = 0;

	(void)state;
	server_start(h_nodes_pages);
	c = client("t", NULL, 2000);
	if (kube_list_all(c, "nodes", 2, on_item, &s, rv, sizeof(rv), &code, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(s.n, 5);
	for (int i = 0; i < 5; i++) {
		char want[8];
		snprintf(want, sizeof(want), "n%d", i + 1);
		assert_string_equal(s.names[i], want);
	}
	assert_string_equal(rv, "100");
	assert_int_equal(code, 200);
	assert_int_equal(srv.nreq, 3);
	assert_string_equal(srv.paths[0], "/api/v1/nodes?limit=2");
	assert_string_equal(srv.paths[1], "/api/v1/nodes?limit=2&continue=c%2F1");
	assert_string_equal(srv.auth[2], "Bearer t");
	assert_int_equal(obs.calls, 3);
	assert_string_equal(obs.verb, "list");
	assert_string_equal(obs.resource, "nodes");
	assert_int_equal(srv.nconn, 1);

	/* The callback stops it: no further page is asked for. */
	s = (struct items_seen){.stop_at = 2};
	assert_int_equal(kube_list_all(c, "nodes", 2, on_item, &s, NULL, 0, NULL, err, sizeof(err)),
	                 KUBE_ESTOP);
	assert_int_equal(s.n, 2);
	assert_int_equal(srv.nreq, 4);

	/* An rv buffer too small for the version. */
	s = (struct items_seen){0};
	assert_int_equal(kube_list_all(c, "nodes", 2, on_item, &s, rv, 3, NULL, err, sizeof(err)),
	                 KUBE_ETOOBIG);

	/* Bad arguments: no request. */
	assert_int_equal(kube_list_all(c, "Nodes", 2, on_item, &s, NULL, 0, NULL, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(kube_list_all(c, "", 2, on_item, &s, NULL, 0, NULL, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(
	    kube_list_all(c, "pods/x", 2, on_item, &s, NULL, 0, NULL, err, sizeof(err)),
	    KUBE_EINVAL);
	assert_int_equal(kube_list_all(c, "pods", -1, on_item, &s, NULL, 0, NULL, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(kube_list_all(c, "pods", 0, NULL, &s, NULL, 0, NULL, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(srv.nreq, 7);
	kube_client_free(c);
	server_stop();
}

/* Page 2 answers 410 (continue token expired); a list without a resourceVersion. */
static void h_pods_gone_midway(int n, const char *path, struct reply *r)
{
	if (strstr(path, "nodes") != NULL) {
		r->body = dupf("{\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"x\"}}]}");
	} else if (strstr(path, "continue=") == NULL) {
		assert_string_equal(path, "/api/v1/pods?limit=500");
		r->body = dupf("{\"metadata\":{\"resourceVersion\":\"7\",\"continue\":\"t1\"},"
		               "\"items\":[{\"metadata\":{\"name\":\"a\"}}]}");
	} else {
		(void)n;
		r->status = 410;
		r->body = dupf("{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"The "
		               "provided continue parameter is too old\",\"code\":410}");
	}
}

static void test_list_all_gone_midway(void **state)
{
	struct kube_client *c;
	struct items_seen s = {0};
	char rv[KUBE_RV_MAX] = "", err[256] = "";
	long code = 0;

	(void)state;
	server_start(h_pods_gone_midway);
	c = client(NULL, NULL, 2000);
	assert_int_equal(
	    kube_list_all(c, "pods", 0, on_item, &s, rv, sizeof(rv), &code, err, sizeof(err)),
	    KUBE_EGONE);
	assert_int_equal(code, 410);
	assert_int_equal(s.n, 1);
	assert_int_equal(srv.nreq, 2); /* not retried: the caller relists */
	assert_string_equal(rv, "");
	assert_non_null(strstr(err, "too old"));
	assert_string_equal(kube_strerror(KUBE_EGONE), "gone (resource version too old)");

	s = (struct items_seen){0};
	assert_int_equal(
	    kube_list_all(c, "nodes", 0, on_item, &s, rv, sizeof(rv), &code, err, sizeof(err)),
	    KUBE_EPARSE);
	assert_non_null(strstr(err, "resourceVersion"));
	kube_client_free(c);
	server_stop();
}

/* ---- kube_watch ---- */

#define EV(type, name, rv)                                                                         \
	"{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name       \
	"\",\"resourceVersion\":\"" rv "\"}}}\n"
#define BOOKMARK(rv)                                                                               \
	"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":"   \
	"\"" rv "\"}}}\n"

struct events_seen {
	pthread_mutex_t mu;
	int n;
	enum watch_event_type type[16];
	char rv[16][32];
	int stop_at;
	int opened; /* WATCH_OPENED notifications (kept apart from the events) */
};

static int on_event(void *ctx, enum watch_event_type type, const struct cJSON *object)
{
	struct events_seen *s = ctx;

	if (type == WATCH_OPENED) { /* before any event, with no object, once per watch */
		pthread_mutex_lock(&s->mu);
		assert_null(object);
		s->opened++;
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	const char *rv = watch_resource_version(object);

	pthread_mutex_lock(&s->mu);
	assert_true(s->n < 16);
	s->type[s->n] = type;
	snprintf(s->rv[s->n], sizeof(s->rv[s->n]), "%s", rv ? rv : "-");
	s->n++;
	pthread_mutex_unlock(&s->mu);
	return s->stop_at != 0 && s->n == s->stop_at;
}

/* Events with pauses, the first cut inside a token, two events and a bookmark in one chunk. */
static void h_watch_stream(int n, const char *path, struct reply *r)
{
	static const char e1[] = EV("ADDED", "a", "5001");

	(void)n;
	(void)path;
	r->chunked = 1;
	r->pause_ms = 30;
	r->parts[0] = dupf("%.17s", e1);
	r->parts[1] = dupf("%s", e1 + 17);
	r->parts[2] = dupf(EV("MODIFIED", "a", "5002") "\n" BOOKMARK("5003"));
	r->parts[3] = dupf(EV("DELETED", "a", "5004"));
	r->nparts = 4;
}

static void test_watch_stream(void **state)
{
	struct events_seen s = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {{0}}, 0, 0};
	struct kube_client *c;
	char err[256] = "";
	long code = 0;

	(void)state;
	server_start(h_watch_stream);
	c = client("wt", NULL, 2000);
	if (kube_watch(c, "pods", "5000", 30, on_event, &s, NULL, &code, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(code, 200);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.type[0], WATCH_ADDED);
	assert_int_equal(s.type[1], WATCH_MODIFIED);
	assert_int_equal(s.type[2], WATCH_BOOKMARK);
	assert_int_equal(s.type[3], WATCH_DELETED);
	assert_string_equal(s.rv[0], "5001");
	assert_string_equal(s.rv[2], "5003");
	assert_string_equal(s.rv[3], "5004");
	assert_string_equal(srv.paths[0], "/api/v1/pods?watch=1&resourceVersion=5000&"
	                                  "allowWatchBookmarks=true&timeoutSeconds=30");
	assert_string_equal(srv.auth[0], "Bearer wt");
	assert_int_equal(obs.calls, 1);
	assert_string_equal(obs.verb, "watch");
	assert_string_equal(obs.resource, "pods");
	assert_int_equal(obs.code, 200);
	assert_true(obs.seconds >= 0.09);

	/* No resourceVersion: from the server's current state; the callback stops it. */
	s.n = 0;
	s.stop_at = 2;
	assert_int_equal(
	    kube_watch(c, "nodes", NULL, 5, on_event, &s, NULL, &code, err, sizeof(err)),
	    KUBE_ESTOP);
	assert_int_equal(s.n, 2);
	assert_string_equal(srv.paths[1],
	                    "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=5");
	/* Its own connection each time (the per-thread handle is not used). */
	assert_int_equal(srv.nconn, 2);

	assert_int_equal(kube_watch(c, "pods", "1", 0, on_event, &s, NULL, NULL, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(kube_watch(c, "po ds", "1", 5, on_event, &s, NULL, NULL, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(kube_watch(c, "pods", "1", 5, NULL, &s, NULL, NULL, err, sizeof(err)),
	                 KUBE_EINVAL);
	assert_int_equal(srv.nreq, 2);
	kube_client_free(c);
	server_stop();
}

/* 0: HTTP 410; 1: an ERROR event with a 410 Status; 2: an ERROR event with a 500; 3: garbage;
 * 4: a last event without its newline; 5: a 403. */
static void h_watch_errors(int n, const char *path, struct reply *r)
{
	(void)path;
	if (n == 0 || n == 5) {
		r->status = n == 0 ? 410 : 403;
		r->body =
		    dupf("{\"kind\":\"Status\",\"message\":\"%s\",\"code\":%d}",
		         n == 0 ? "too old resource version: 1 (20)" : "forbidden", r->status);
		return;
	}
	r->chunked = 1;
	r->parts[0] = dupf(EV("ADDED", "a", "21"));
	if (n == 1 || n == 2)
		r->parts[1] = dupf("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
		                   "\"message\":\"m%d\",\"reason\":\"Expired\",\"code\":%d}}\n",
		                   n, n == 1 ? 410 : 500);
	else if (n == 3)
		r->parts[1] = dupf("<html>oops</html>\n");
	else
		r->parts[1] =
		    dupf("%.*s", (int)strlen(EV("ADDED", "b", "22")) - 1, EV("ADDED", "b", "22"));
	r->nparts = 2;
}

static void test_watch_errors(void **state)
{
	struct events_seen s = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {{0}}, 0, 0};
	struct kube_client *c;
	char err[256] = "";
	long code = 0;

	(void)state;
	server_start(h_watch_errors);
	c = client(NULL, NULL, 2000);
	assert_int_equal(
	    kube_watch(c, "pods", "1", 30, on_event, &s, NULL, &code, err, sizeof(err)),
	    KUBE_EGONE);
	assert_int_equal(code, 410);
	assert_non_null(strstr(err, "too old resource version"));
	assert_int_equal(s.n, 0);
	assert_int_equal(obs.code, 410);

	assert_int_equal(
	    kube_watch(c, "pods", "1", 30, on_event, &s, NULL, &code, err, sizeof(err)),
	    KUBE_EGONE);
	assert_int_equal(code, 200);
	assert_int_equal(s.n, 2); /* the caller saw the ERROR event */
	assert_int_equal(s.type[1], WATCH_ERROR);
	assert_non_null(strstr(err, "m1"));

	assert_int_equal(
	    kube_watch(c, "pods", "1", 30, on_event, &s, NULL, &code, err, sizeof(err)),
	    KUBE_EHTTP);
	assert_non_null(strstr(err, "code 500"));
	assert_int_equal(s.n, 4);

	assert_int_equal(
	    kube_watch(c, "pods", "1", 30, on_event, &s, NULL, &code, err, sizeof(err)),
	    KUBE_EPARSE);
	assert_non_null(strstr(err, "oops"));
	assert_int_equal(s.n, 5);

	assert_int_equal(
	    kube_watch(c, "pods", "1", 30, on_event, &s, NULL, &code, err, sizeof(err)), 0);
	assert_int_equal(s.n, 7);
	assert_string_equal(s.rv[6], "22");

	assert_int_equal(
	    kube_watch(c, "pods", "1", 30, on_event, &s, NULL, &code, err, sizeof(err)),
	    KUBE_EHTTP);
	assert_int_equal(code, 403);
	assert_non_null(strstr(err, "forbidden"));
	kube_client_free(c);
	server_stop();
}

/* One event, then silence with the connection open. */
static void h_watch_hang(int n, const char *path, struct reply *r)
{
	(void)n;
	(void)path;
	r->chunked = 1;
	r->hang_after = 1;
	r->parts[0] = dupf(EV("ADDED", "a", "9"));
	r->nparts = 1;
}

struct stopper {
	_Atomic int *flag;
	int after_ms;
};

static void *stopper_main(void *arg)
{
	struct stopper *st = arg;

	sleep_ms(st->after_ms);
	*st->flag = 1; /* an atomic store, as informer_free's */
	return NULL;
}

static void test_watch_stop_flag(void **state)
{
	struct events_seen s = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {{0}}, 0, 0};
	_Atomic int stop = 0;
	struct stopper st = {&stop, 300};
	struct kube_client *c;
	char err[256] = "";
	pthread_t t;
	double t0;

	(void)state;
	server_start(h_watch_hang);
	c = client(NULL, NULL, 2000);
	t0 = now();
	assert_int_equal(pthread_create(&t, NULL, stopper_main, &st), 0);
	assert_int_equal(
	    kube_watch(c, "pods", "1", 600, on_event, &s, &stop, NULL, err, sizeof(err)),
	    KUBE_ESTOP);
	pthread_join(t, NULL);
	assert_true(now() - t0 < 2.5);
	assert_true(now() - t0 >= 0.29);
	assert_int_equal(s.n, 1);
	assert_string_equal(kube_strerror(KUBE_ESTOP), "stopped");

	/* Already set: ends before the first event is passed on. */
	t0 = now();
	assert_int_equal(
	    kube_watch(c, "pods", "1", 600, on_event, &s, &stop, NULL, err, sizeof(err)),
	    KUBE_ESTOP);
	assert_true(now() - t0 < 2.5);
	assert_int_equal(s.n, 1);
	kube_client_free(c);
	server_stop();
}

/* A connection that stays open with no byte: dead after timeoutSeconds + the slack. */
static void test_watch_dead_connection(void **state)
{
	struct events_seen s = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {{0}}, 0, 0};
	struct kube_client *c;
	char err[256] = "";
	double t0;

	(void)state;
	server_start(h_watch_hang);
	c = client(NULL, NULL, 2000);
	kube_client_set_watch_idle_slack(c, 1);
	t0 = now();
	assert_int_equal(kube_watch(c, "pods", "1", 1, on_event, &s, NULL, NULL, err, sizeof(err)),
	                 KUBE_ETIMEOUT);
	assert_true(now() - t0 >= 1.9);
	assert_true(now() - t0 < 15.0);
	assert_int_equal(s.n, 1);
	assert_non_null(strstr(err, "no byte for 2 s"));
	kube_client_free(c);
	server_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_get_pod_escapes_and_observes, setup),
	    cmocka_unit_test_setup(test_not_found, setup),
	    cmocka_unit_test_setup(test_server_error_status_message, setup),
	    cmocka_unit_test_setup(test_not_json, setup),
	    cmocka_unit_test_setup(test_pagination_with_continue, setup),
	    cmocka_unit_test_setup(test_gone_restarts_once, setup),
	    cmocka_unit_test_setup(test_page_cap, setup),
	    cmocka_unit_test_setup(test_body_cap, setup),
	    cmocka_unit_test_setup(test_timeout_server_never_answers, setup),
	    cmocka_unit_test_setup(test_transport_error, setup),
	    cmocka_unit_test_setup(test_invalid_arguments, setup),
	    cmocka_unit_test_setup(test_patch_status, setup),
	    cmocka_unit_test_setup(test_token_file_reread, setup),
	    cmocka_unit_test_setup(test_threads_own_handles, setup),
	    cmocka_unit_test_setup(test_tls_blobs_and_client_cert, setup),
	    cmocka_unit_test_setup(test_tls_files, setup),
	    cmocka_unit_test_setup(test_tls_refusals, setup),
	    cmocka_unit_test_setup(test_list_all_pages, setup),
	    cmocka_unit_test_setup(test_list_all_gone_midway, setup),
	    cmocka_unit_test_setup(test_watch_stream, setup),
	    cmocka_unit_test_setup(test_watch_errors, setup),
	    cmocka_unit_test_setup(test_watch_stop_flag, setup),
	    cmocka_unit_test_setup(test_watch_dead_connection, setup),
	};
	int failed;

	pthread_mutex_init(&obs.mu, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	failed = cmocka_run_group_tests(tests, pki_setup, pki_teardown);
	curl_global_cleanup();
	return failed;
}
