/*
 * rrproxy: a round-robin TCP proxy for the end-to-end tests, in front of several webhook
 * replicas as a Kubernetes Service is (kube-proxy picks one endpoint per connection, not per
 * request). A test tool, not a test; e2e test 12 (test/e2e/run.sh) runs it.
 *
 *   rrproxy LISTEN_HOST:PORT BACKEND_HOST:PORT [BACKEND_HOST:PORT...]
 *
 * - Each accepted connection goes to the next backend in turn; a backend that refuses the
 *   connection (a replica that died) is skipped for the next one, so a connection fails only
 *   when every backend refuses it.
 * - Bytes are copied both ways untouched (TLS passes through: the client's handshake is with the
 *   backend), one thread per direction and blocking I/O: a direction can never wait on the other,
 *   so there is no buffer to manage and no deadlock. An end of stream is passed on as a half
 *   close (shutdown SHUT_WR); an error on either side ends both directions.
 * - SIGTERM or SIGINT: stop accepting, print the per-backend counts on stderr, exit 0 (open
 *   connections are closed by the exit, as a proxy that goes away closes them).
 * - Both sockets of a connection have TCP_NODELAY: the bytes of a record are passed on as they
 *   come, so that a small write after another never waits for the peer's (delayed) ACK, which a
 *   proxy in front of request/answer traffic would otherwise add (kube-proxy adds no hop at all).
 * Exit status: 0 after SIGTERM/SIGINT, 1 when it cannot listen, 2 on a bad command line.
 * Hosts are numeric addresses or names getaddrinfo() resolves (the first address is used);
 * an IPv6 address is written in brackets: [::1]:8443.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_BACKENDS    16
#define MAX_CONNECTIONS 1024         /* open at once; more are closed at accept */
#define ADDR_MAX        256          /* "host:port" as given on the command line */
#define COPY_BUF        16384        /* bytes per read, per direction */
#define THREAD_STACK    (256 * 1024) /* two threads per connection: keep them small */

struct backend {
	char name[ADDR_MAX];
	struct sockaddr_storage addr;
	socklen_t addrlen;
	atomic_ulong connections; /* connections handed to it */
	atomic_ulong refused;     /* connect() failures */
};

struct conn {
	int client;
	int backend;
};

/* One direction of a connection. */
struct pump {
	int from;
	int to;
};

static struct backend backends[MAX_BACKENDS];
static int nbackends;
static atomic_int open_connections;
static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
	int saved = errno;
	ssize_t n = write(signal_pipe[1], "x", 1);
	(void)n; /* the pipe holds one byte at least: the loop wakes either way */
	(void)sig;
	errno = saved;
}

/* Splits "host:port" or "[v6]:port" and resolves it; 0 or -1 with the reason on stderr. */
static int resolve(const char *spec, int passive, struct sockaddr_storage *out, socklen_t *len)
{
	char host[ADDR_MAX];
	const char *colon = strrchr(spec, ':');
	size_t hlen;
	struct addrinfo hints = {0}, *res = NULL;
	int rc;

	if (colon == NULL || colon == spec || colon[1] == '\0' || strlen(spec) >= ADDR_MAX) {
		fprintf(stderr, "rrproxy: %s: want HOST:PORT\n", spec);
		return -1;
	}
	hlen = (size_t)(colon - spec);
	if (spec[0] == '[' && hlen >= 2 && spec[hlen - 1] == ']') {
		memcpy(host, spec + 1, hlen - 2);
		host[hlen - 2] = '\0';
	} else {
		memcpy(host, spec, hlen);
		host[hlen] = '\0';
	}
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "rrproxy: %s: %s\n", spec, gai_strerror(rc));
		return -1;
	}
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Writes all of buf; 0, or -1 when the peer is gone. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Copies from->to until from ends. A clean end is passed on as a half close (the other
 * direction may still carry the answer); an error shuts both sockets down both ways, which also
 * ends the other direction's blocking read.
 */
static void pump_run(const struct pump *p)
{
	char buf[COPY_BUF];

	for (;;) {
		ssize_t n = recv(p->from, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			shutdown(p->to, SHUT_WR);
			return;
		}
		if (n < 0 || write_all(p->to, buf, (size_t)n) != 0) {
			shutdown(p->from, SHUT_RDWR);
			shutdown(p->to, SHUT_RDWR);
			return;
		}
	}
}

static void *pump_main(void *arg)
{
	pump_run(arg);
	return NULL;
}

/* A connection's thread: client->backend on a second thread, backend->client on this one. */
static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct pump up = {c->client, c->backend}, down = {c->backend, c->client};
	pthread_attr_t attr;
	pthread_t t;
	int started;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	started = pthread_create(&t, &attr, pump_main, &up) == 0;
	pthread_attr_destroy(&attr);
	if (started) {
		pump_run(&down);
		pthread_join(t, NULL);
	} else {
		fprintf(stderr, "rrproxy: no thread for a connection; closing it\n");
	}
	close(c->client);
	close(c->backend);
	free(c);
	atomic_fetch_sub(&open_connections, 1);
	return NULL;
}

/* TCP_NODELAY (see the top); a socket that refuses it still works, only slower. */
static void nodelay(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Connects to backend i; the socket, or -1 (counted, and said on stderr). */
static int connect_backend(int i)
{
	struct backend *b = &backends[i];
	int fd = socket(b->addr.ss_family, SOCK_STREAM, 0);

	if (fd >= 0) {
		int rc;
		do
			rc = connect(fd, (struct sockaddr *)&b->addr, b->addrlen);
		while (rc < 0 && errno == EINTR);
		if (rc == 0) {
			nodelay(fd);
			return fd;
		}
		close(fd);
	}
	atomic_fetch_add(&b->refused, 1);
	fprintf(stderr, "rrproxy: backend %s: %s; trying the next\n", b->name, strerror(errno));
	return -1;
}

/* Hands a new client connection to the next backend that accepts one. */
static void dispatch(int client, unsigned long seq)
{
	struct conn *c = NULL;
	pthread_attr_t attr;
	pthread_t t;
	int i, fd = -1, rc;

	if (atomic_load(&open_connections) >= MAX_CONNECTIONS) {
		fprintf(stderr, "rrproxy: %d connections open; refusing one\n", MAX_CONNECTIONS);
		goto fail;
	}
	for (i = 0; i < nbackends && fd < 0; i++) {
		int b = (int)((seq + (unsigned long)i) % (unsigned long)nbackends);
		fd = connect_backend(b);
		if (fd >= 0)
			atomic_fetch_add(&backends[b].connections, 1);
	}
	if (fd < 0) {
		fprintf(stderr, "rrproxy: every backend refused; closing the client\n");
		goto fail;
	}
	c = malloc(sizeof(*c));
	if (c == NULL)
		goto fail;
	c->client = client;
	c->backend = fd;
	atomic_fetch_add(&open_connections, 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		return;
	atomic_fetch_sub(&open_connections, 1);
	fprintf(stderr, "rrproxy: pthread_create: %s\n", strerror(rc));
fail:
	free(c);
	if (fd >= 0)
		close(fd);
	close(client);
}

static int listen_on(const char *spec)
{
	struct sockaddr_storage addr;
	socklen_t len;
	int fd, one = 1;

	if (resolve(spec, 1, &addr, &len) != 0)
		return -1;
	fd = socket(addr.ss_family, SOCK_STREAM, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, 128) != 0) {
		fprintf(stderr, "rrproxy: listen on %s: %s\n", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {0};
	struct pollfd fds[2];
	unsigned long seq = 0, total = 0;
	int lfd, i;

	if (argc < 3 || argc - 2 > MAX_BACKENDS) {
		fprintf(stderr, "usage: rrproxy LISTEN_HOST:PORT BACKEND_HOST:PORT... (1 to %d)\n",
		        MAX_BACKENDS);
		return 2;
	}
	for (i = 2; i < argc; i++) {
		struct backend *b = &backends[nbackends++];
		if (resolve(argv[i], 0, &b->addr, &b->addrlen) != 0)
			return 2;
		snprintf(b->name, sizeof(b->name), "%s", argv[i]);
	}
	if (pipe(signal_pipe) != 0) {
		perror("rrproxy: pipe");
		return 1;
	}
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(argv[1]);
	if (lfd < 0)
		return 1;
	fprintf(stderr, "rrproxy: listening on %s, %d backends\n", argv[1], nbackends);

	fds[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
	fds[1] = (struct pollfd){.fd = signal_pipe[0], .events = POLLIN};
	for (;;) {
		int client;
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("rrproxy: poll");
			break;
		}
		if (fds[1].revents != 0)
			break;
		if (!(fds[0].revents & POLLIN))
			continue;
		client = accept(lfd, NULL, NULL);
		if (client < 0) {
			/* EMFILE and the like: wait a little instead of spinning on poll(). */
			if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
				nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
			continue;
		}
		total++;
		nodelay(client);
		dispatch(client, seq++);
	}
	close(lfd);
	fprintf(stderr, "rrproxy: exit: %lu connections accepted, %d open;", total,
	        atomic_load(&open_connections));
	for (i = 0; i < nbackends; i++)
		fprintf(stderr, " %s %lu (refused %lu)", backends[i].name,
		        atomic_load(&backends[i].connections), atomic_load(&backends[i].refused));
	fprintf(stderr, "\n");
	return 0;
}
