/*
 * smcxfer - extra AF_SMC test modes for the extra lab scenarios
 * (scenarios-extra/); smcpingpong covers the simple request/reply cases.
 *
 *   smcxfer bidir-server PORT BYTES [CHUNK PAUSE_MS]     both ends send BYTES and
 *   smcxfer bidir-client IP PORT BYTES [CHUNK PAUSE_MS]  receive the peer's BYTES at
 *                                           the same time; optionally paced: CHUNK-byte
 *                                           writes with PAUSE_MS after each
 *   smcxfer urg-server PORT MODE            urgent data (send(MSG_OOB)), MODE =
 *   smcxfer urg-client IP PORT MODE         oob|oob-stall|inline|big, see "urgent"
 *   smcxfer abort-server PORT CASE [N]      abnormal terminations, see "abort"
 *   smcxfer abort-client IP PORT CASE
 *   smcxfer ipsec-server PORT [N]           listener with a per-socket IPsec
 *                                           (xfrm) policy: SMC declines IPSEC
 *   smcxfer ipsec-client IP PORT            client socket with such a policy
 *   smcxfer fastopen-client IP PORT         TCP_FASTOPEN_CONNECT on AF_SMC:
 *                                           local fallback before the SYN
 *   smcxfer plain-server PORT N             N sequential AF_SMC connections:
 *                                           read to EOF, reply "ACK n fnv1a=..."
 *
 * Data patterns: the client sends "0123456789abcdef"[i % 16] (stream byte i),
 * the server "ABCDEFGHIJKLMNOP"[i % 16]. Checksums are 32-bit FNV-1a
 * (offset basis 0x811c9dc5, prime 16777619), as in smcpingpong.
 * SMCXFER_HOOK="cmd" is run (system()) right after connect/accept.
 * Every line starts with "[up SECONDS]" (CLOCK_BOOTTIME, the clock of /proc/uptime and of
 * the lab's scenario logs); every connection prints its 4-tuple.
 *
 * urgent: the client sends a scripted stream in which some send() calls use
 * MSG_OOB (the last byte of such a send is the urgent byte, as in TCP). Every
 * send is printed with its stream offsets. The receiver polls for
 * POLLIN|POLLPRI; on POLLPRI it reads the urgent byte with recv(MSG_OOB)
 * ("oob"/"big") or, with SO_OOBINLINE ("inline"), reads it inline and prints
 * SIOCATMARK before every read. After the client's EOF the server answers
 * with its own stream containing one urgent byte ('*'), read the same way.
 * Receivers start reading 500 ms late, so an urgent byte and the bytes in
 * front of it have both arrived when the reading starts (POLLPRI is handled
 * first: recv(MSG_OOB), then the normal bytes).
 * "oob-stall": the client sends its first 61 bytes, waits 1 s (the server,
 * reading at once, has consumed them by then), and only then sends the
 * 1-byte urgent '!'. The server reads '!' with recv(MSG_OOB) while its
 * consumer cursor is right in front of it; Linux 6.12 then never advances
 * the consumer cursor over the urgent byte (smc_rx_recv_urg sets
 * urg_state = SMC_URG_READ before smc_rx_update_consumer() would skip it),
 * so the client's next send() waits forever for the urgent byte to be
 * consumed: the client gives up after SO_SNDTIMEO (5 s) and closes; the
 * server does not reply in this mode. All senders use SO_SNDTIMEO 5 s.
 *
 * abort CASEs (the server side must be started with the same CASE):
 *   unread-close  server reads 10000 bytes, waits 1 s, close()s with unread
 *                 data in its RMB; the client keeps writing (paced) and
 *                 reports the error it gets.
 *   kill          server sends a 3000-byte banner the client never reads;
 *                 the client writes 16 KiB every 50 ms until it is killed
 *                 (SIGKILL by the scenario script); the server reads until
 *                 EOF/error.
 *   kill-clean    like kill, but the client reads the banner first (so it
 *                 has no unread data when it is killed).
 *   linger0       client sets SO_LINGER {1,0}, writes 300000 bytes in one
 *                 write() and close()s at once; the server reads to EOF.
 *   devkill       the server writes 100 bytes every 200 ms (up to N times,
 *                 default 300) and reports the first error; the client reads and
 *                 prints its progress until EOF/error (the scenario removes
 *                 the client's RoCE device meanwhile).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <linux/xfrm.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#ifndef IP_XFRM_POLICY
#define IP_XFRM_POLICY 17
#endif
#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30
#endif

static const char PAT_C[] = "0123456789abcdef", PAT_S[] = "ABCDEFGHIJKLMNOP";
static double t_start;
static size_t bidir_chunk;
static int bidir_pause_ms;
static int abort_count = 300;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* one line with a timestamp, written in one go (two threads may print) */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	int k;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	k = snprintf(line, sizeof(line), "[up %.3f] ", ts.tv_sec + ts.tv_nsec / 1e9);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line + k, sizeof(line) - k, fmt, ap);
	va_end(ap);
	fputs(line, stdout);
	fflush(stdout);
}

static void die(const char *what)
{
	say("%s: %s\n", what, strerror(errno));
	exit(1);
}

static uint32_t fnv(uint32_t h, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	while (n--) {
		h ^= *p++;
		h *= 16777619u;
	}
	return h;
}
#define FNV0 2166136261u

static void hook(void)
{
	const char *cmd = getenv("SMCXFER_HOOK");

	if (cmd && *cmd) {
		fflush(stdout);
		if (system(cmd) != 0)
			fprintf(stderr, "hook '%s' failed\n", cmd);
		fflush(stdout);
	}
}

static void print_addrs(int fd, const char *who)
{
	struct sockaddr_in l, p;
	socklen_t ll = sizeof(l), pl = sizeof(p);
	char a[32], b[32];

	getsockname(fd, (struct sockaddr *)&l, &ll);
	getpeername(fd, (struct sockaddr *)&p, &pl);
	inet_ntop(AF_INET, &l.sin_addr, a, sizeof(a));
	inet_ntop(AF_INET, &p.sin_addr, b, sizeof(b));
	say("%s: connection %s:%d <-> %s:%d\n", who, a, ntohs(l.sin_port), b, ntohs(p.sin_port));
}

static int smc_socket(void)
{
	int fd = socket(AF_SMC, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket(AF_SMC)");
	return fd;
}

static int listen_on(int port, int backlog)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, fd = smc_socket();

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	if (listen(fd, backlog) < 0)
		die("listen");
	say("server: listening on port %d (AF_SMC)\n", port);
	return fd;
}

static int accept_one(int lfd)
{
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		die("accept");
	print_addrs(fd, "server");
	return fd;
}

static int connect_to(int fd, const char *ip, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	double t0 = now();

	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		die("inet_pton");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	say("client: connected to %s:%d in %.3fs\n", ip, port, now() - t0);
	print_addrs(fd, "client");
	return fd;
}

/* write n bytes of the pattern, continuing at stream offset *off */
static ssize_t write_pattern(int fd, const char *pat, size_t n, size_t *off, uint32_t *h, int flags)
{
	static char buf[65536 + 16];
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < 65536 ? n - done : 65536;
		ssize_t w;

		for (size_t i = 0; i < k; i++)
			buf[i] = pat[(*off + i) % 16];
		w = send(fd, buf, k, flags | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return done ? (ssize_t)done : -1;
		}
		*h = fnv(*h, buf, w);
		*off += w;
		done += w;
	}
	return done;
}

/* --------------------------------------------------------------- bidir -- */
struct wctx {
	int fd;
	long bytes;
	const char *pat;
	const char *who;
	uint32_t h;
	size_t sent;
	double t;
};

static void *writer(void *arg)
{
	struct wctx *w = arg;
	double t0 = now();
	size_t chunk = bidir_chunk ? bidir_chunk : (size_t)w->bytes, next_mark = 262144;

	while ((long)w->sent < w->bytes) {
		size_t n = w->bytes - w->sent < (long)chunk ? w->bytes - w->sent : chunk;
		size_t before = w->sent;

		if (write_pattern(w->fd, w->pat, n, &w->sent, &w->h, 0) < (ssize_t)n) {
			say("%s: write failed after %zu bytes sent: %s\n", w->who, w->sent, strerror(errno));
			break;
		}
		if (w->sent >= next_mark) {
			say("%s: %zu bytes sent (fnv1a so far %08x)\n", w->who, w->sent, w->h);
			while (next_mark <= w->sent)
				next_mark += 262144;
		}
		if (bidir_pause_ms && (long)w->sent < w->bytes && w->sent > before)
			usleep(bidir_pause_ms * 1000);
	}
	w->t = now() - t0;
	shutdown(w->fd, SHUT_WR);
	say("%s: writer done: sent %zu bytes fnv1a=%08x in %.3fs, shutdown(SHUT_WR)\n",
	    w->who, w->sent, w->h, w->t);
	return NULL;
}

static int bidir(int fd, long bytes, const char *who, const char *pat)
{
	struct wctx w = { .fd = fd, .bytes = bytes, .pat = pat, .who = who, .h = FNV0 };
	static char buf[65536];
	uint32_t h = FNV0;
	size_t total = 0;
	pthread_t th;
	double t0;
	ssize_t r;

	size_t next_mark = 262144;

	hook();
	t0 = now();
	say("%s: sending %ld bytes of pattern '%s' while receiving (%zu-byte writes, %d ms pauses)\n",
	    who, bytes, pat, bidir_chunk ? bidir_chunk : (size_t)bytes, bidir_pause_ms);
	pthread_create(&th, NULL, writer, &w);
	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			say("%s: read: %s\n", who, strerror(errno));
			break;
		}
		if (!total)
			say("%s: first bytes received: '%.16s'\n", who, buf);
		h = fnv(h, buf, r);
		total += r;
		if (total >= next_mark) {
			say("%s: %zu bytes received (fnv1a so far %08x)\n", who, total, h);
			while (next_mark <= total)
				next_mark += 262144;
		}
	}
	say("%s: reader done: received %zu bytes fnv1a=%08x (EOF after %.3fs)\n", who, total, h, now() - t0);
	pthread_join(th, NULL);
	say("%s: RESULT sent=%zu sent_fnv1a=%08x received=%zu received_fnv1a=%08x\n",
	    who, w.sent, w.h, total, h);
	close(fd);
	return 0;
}

/* -------------------------------------------------------------- urgent -- */
static void printable(char *dst, const char *src, size_t n, size_t max)
{
	size_t k = n < max ? n : max;

	for (size_t i = 0; i < k; i++)
		dst[i] = (src[i] >= 32 && src[i] < 127) ? src[i] : '.';
	dst[k] = 0;
}

/* receive a stream that may contain urgent data; returns bytes read inline */
static size_t urg_receive(int fd, const char *who, int inl, int delay_ms)
{
	static char buf[65536];
	char shown[128], oobs[64] = "";
	size_t normal = 0, noob = 0;
	uint32_t h = FNV0;

	if (delay_ms) {
		usleep(delay_ms * 1000);
		say("%s: starting to read after %d ms\n", who, delay_ms);
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN | POLLPRI };
		int mark = -1;
		ssize_t r;

		if (poll(&p, 1, 8000) <= 0) {
			say("%s: nothing to read for 8 s (poll timeout), giving up\n", who);
			break;
		}
		if (p.revents & POLLPRI) {
			ioctl(fd, SIOCATMARK, &mark);
			if (!inl) {
				char c;

				r = recv(fd, &c, 1, MSG_OOB);
				if (r == 1) {
					say("%s: POLLPRI: recv(MSG_OOB) -> urgent byte '%c' (0x%02x); %zu normal bytes read before it; SIOCATMARK=%d\n",
					    who, c, (unsigned char)c, normal, mark);
					if (noob < sizeof(oobs) - 1)
						oobs[noob] = c;
					noob++;
					continue;
				}
				say("%s: POLLPRI: recv(MSG_OOB) = %zd (%s), SIOCATMARK=%d\n", who, r,
				    r < 0 ? strerror(errno) : "", mark);
			} else {
				say("%s: POLLPRI (urgent data pending, inline), SIOCATMARK=%d, %zu bytes read so far\n",
				    who, mark, normal);
			}
		}
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ioctl(fd, SIOCATMARK, &mark);
		r = read(fd, buf, sizeof(buf));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			say("%s: read: %s\n", who, strerror(errno));
			break;
		}
		if (r == 0) {
			say("%s: EOF\n", who);
			break;
		}
		printable(shown, buf, r, 100);
		say("%s: read %zd bytes at stream offset %zu (SIOCATMARK before read=%d): '%s'%s\n",
		    who, r, normal, mark, shown, r > 100 ? "..." : "");
		h = fnv(h, buf, r);
		normal += r;
	}
	say("%s: RESULT received %zu bytes in the normal stream fnv1a=%08x, %zu urgent byte(s) via MSG_OOB '%s'\n",
	    who, normal, h, noob, oobs);
	return normal;
}

struct step {
	int oob;
	const char *text;	/* NULL: big pattern block */
	int delay_ms;		/* sleep before this send */
};

static int urg_send(int fd, const char *who, const struct step *steps, int n, size_t big)
{
	size_t off = 0, nurg = 0;
	uint32_t h_all = FNV0, h_inline_free = FNV0;

	for (int i = 0; i < n; i++) {
		size_t len = steps[i].text ? strlen(steps[i].text) : big;
		char *data = malloc(len + 1);
		ssize_t w;

		if (steps[i].delay_ms) {
			usleep(steps[i].delay_ms * 1000);
			say("%s: (waited %d ms before send #%d)\n", who, steps[i].delay_ms, i + 1);
		}
		if (steps[i].text) {
			memcpy(data, steps[i].text, len);
		} else {
			for (size_t k = 0; k < len; k++)
				data[k] = PAT_C[k % 16];
			data[len - 1] = 'Z';
		}
		say("%s: send #%d %s len=%zu stream bytes [%zu, %zu)%s%c%s\n", who, i + 1,
		    steps[i].oob ? "MSG_OOB" : "normal ", len, off, off + len,
		    steps[i].oob ? ", urgent byte = last byte '" : "", steps[i].oob ? data[len - 1] : ' ',
		    steps[i].oob ? "'" : "");
		if (steps[i].text)
			say("%s:   text: '%s'\n", who, steps[i].text);
		else
			say("%s:   data: %zu bytes of pattern '%s' (byte k = pattern[k %% 16]), last byte replaced by 'Z'\n",
			    who, len, PAT_C);
		for (size_t done = 0; done < len; done += w) {
			w = send(fd, data + done, len - done, (steps[i].oob ? MSG_OOB : 0) | MSG_NOSIGNAL);
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				say("%s: send #%d blocked for 5 s (SO_SNDTIMEO), %zu of its bytes accepted: "
				    "the peer has not consumed the urgent data; giving up\n", who, i + 1, done);
				h_all = fnv(h_all, data, done);
				say("%s: RESULT sent %zu bytes before the stall fnv1a=%08x (send #%d: %zu of %zu bytes accepted)\n",
				    who, off + done, h_all, i + 1, done, len);
				free(data);
				return -1;
			}
			if (w < 0)
				die("send");
		}
		h_all = fnv(h_all, data, len);
		h_inline_free = fnv(h_inline_free, data, steps[i].oob ? len - 1 : len);
		nurg += steps[i].oob;
		say("%s: send #%d returned (all %zu bytes accepted)\n", who, i + 1, len);
		off += len;
		free(data);
	}
	say("%s: RESULT sent %zu bytes in all fnv1a=%08x; without the urgent bytes %zu bytes fnv1a=%08x\n",
	    who, off, h_all, off - nurg, h_inline_free);
	return 0;
}

static const struct step urg_client_steps[] = {
	{ 0, "urgent test part 1: normal data before the first urgent byte|" },
	{ 1, "!" },
	{ 0, "part 2: after the first urgent byte|" },
	{ 1, "an OOB send of several bytes, only the last is urgent:#" },
	{ 0, "part 3: end of the client data." },
};
static const struct step urg_stall_steps[] = {
	{ 0, "urgent test part 1: normal data before the first urgent byte|" },
	{ 1, "!", 1000 },
	{ 0, "part 2: after the first urgent byte|" },
	{ 0, "part 3: end of the client data." },
};
static const struct step urg_server_steps[] = {
	{ 0, "server reply part 1|" },
	{ 1, "*" },
	{ 0, "server reply end." },
};
static const struct step urg_big_steps[] = {
	{ 0, "big OOB send follows|" },
	{ 1, NULL },
	{ 0, "|after the big OOB send." },
};

static void set_sndtimeo(int fd)
{
	struct timeval tv = { .tv_sec = 5 };

	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		die("setsockopt(SO_SNDTIMEO)");
}

static void set_inline(int fd)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)) < 0)
		die("setsockopt(SO_OOBINLINE)");
}

static int urg_server(int port, const char *mode)
{
	int lfd = listen_on(port, 4), fd, inl = !strcmp(mode, "inline");

	fd = accept_one(lfd);
	set_sndtimeo(fd);
	if (inl)
		set_inline(fd), say("server: SO_OOBINLINE set on the accepted socket\n");
	hook();
	urg_receive(fd, "server", inl, strcmp(mode, "oob-stall") ? 500 : 0);
	if (strcmp(mode, "big") && strcmp(mode, "oob-stall"))
		urg_send(fd, "server", urg_server_steps, 3, 0);
	close(fd);
	close(lfd);
	return 0;
}

static int urg_client(const char *ip, int port, const char *mode)
{
	int fd = smc_socket(), inl = !strcmp(mode, "inline");

	if (strcmp(mode, "oob") && strcmp(mode, "oob-stall") && strcmp(mode, "inline") && strcmp(mode, "big")) {
		say("unknown mode %s\n", mode);
		return 2;
	}
	if (inl)
		set_inline(fd), say("client: SO_OOBINLINE set\n");
	set_sndtimeo(fd);
	connect_to(fd, ip, port);
	hook();
	if (!strcmp(mode, "oob-stall")) {
		urg_send(fd, "client", urg_stall_steps, 4, 0);
		say("client: close()\n");
		close(fd);
		return 0;
	}
	if (!strcmp(mode, "big"))
		urg_send(fd, "client", urg_big_steps, 3, 100000);
	else
		urg_send(fd, "client", urg_client_steps, 5, 0);
	shutdown(fd, SHUT_WR);
	say("client: shutdown(SHUT_WR)\n");
	urg_receive(fd, "client", inl, 500);
	close(fd);
	return 0;
}

/* --------------------------------------------------------------- abort -- */
static size_t read_all(int fd, const char *who, uint32_t *h, size_t max)
{
	static char buf[65536];
	size_t total = 0;

	while (!max || total < max) {
		size_t want = max && max - total < sizeof(buf) ? max - total : sizeof(buf);
		ssize_t r = read(fd, buf, want);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			say("%s: read error after %zu bytes: %s (errno %d)\n", who, total, strerror(errno), errno);
			break;
		}
		if (r == 0) {
			say("%s: EOF after %zu bytes\n", who, total);
			break;
		}
		*h = fnv(*h, buf, r);
		total += r;
	}
	return total;
}

static int abort_server(int port, const char *cs)
{
	int lfd = listen_on(port, 4), fd = accept_one(lfd);
	uint32_t h = FNV0;
	size_t n, off = 0;

	hook();
	if (!strcmp(cs, "unread-close")) {
		n = read_all(fd, "server", &h, 10000);
		say("server: read %zu bytes fnv1a=%08x, now sleeping 1 s without reading\n", n, h);
		sleep(1);
		say("server: close() with unread data in the receive buffer\n");
		close(fd);
	} else if (!strcmp(cs, "kill") || !strcmp(cs, "kill-clean")) {
		uint32_t hb = FNV0;

		write_pattern(fd, PAT_S, 3000, &off, &hb, 0);
		say("server: sent a %zu-byte banner (pattern '%s') fnv1a=%08x\n", off, PAT_S, hb);
		n = read_all(fd, "server", &h, 0);
		say("server: RESULT received %zu bytes fnv1a=%08x (pattern '%s', a prefix of the client's stream)\n",
		    n, h, PAT_C);
		close(fd);
	} else if (!strcmp(cs, "linger0")) {
		n = read_all(fd, "server", &h, 0);
		say("server: RESULT received %zu bytes fnv1a=%08x\n", n, h);
		close(fd);
	} else if (!strcmp(cs, "devkill")) {
		signal(SIGPIPE, SIG_IGN);
		for (int i = 0; i < abort_count; i++) {
			if (write_pattern(fd, PAT_S, 100, &off, &h, 0) < 100) {
				say("server: write #%d failed: %s (errno %d) after %zu bytes\n", i + 1,
				    strerror(errno), errno, off);
				break;
			}
			usleep(200000);
		}
		say("server: RESULT wrote %zu bytes fnv1a=%08x\n", off, h);
		close(fd);
	} else {
		say("unknown case %s\n", cs);
		return 2;
	}
	close(lfd);
	return 0;
}

static int abort_client(const char *ip, int port, const char *cs)
{
	int fd = smc_socket();
	uint32_t h = FNV0;
	size_t off = 0;

	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cs, "linger0")) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
			die("setsockopt(SO_LINGER)");
		say("client: SO_LINGER {l_onoff=1, l_linger=0} set\n");
	}
	connect_to(fd, ip, port);
	hook();
	if (!strcmp(cs, "unread-close")) {
		for (int i = 0; i < 64; i++) {
			ssize_t w = write_pattern(fd, PAT_C, 16384, &off, &h, 0);

			if (w < 16384) {
				say("client: write #%d failed: %s (errno %d); %zu bytes accepted in all, fnv1a=%08x\n",
				    i + 1, strerror(errno), errno, off, h);
				break;
			}
			usleep(20000);
		}
		{
			char c;
			ssize_t r = read(fd, &c, 1);

			say("client: read() after that = %zd%s%s\n", r, r < 0 ? " " : "", r < 0 ? strerror(errno) : "");
		}
		say("client: RESULT wrote %zu bytes fnv1a=%08x before the error\n", off, h);
		close(fd);
	} else if (!strcmp(cs, "kill") || !strcmp(cs, "kill-clean")) {
		if (!strcmp(cs, "kill-clean")) {
			uint32_t hb = FNV0;
			size_t n = read_all(fd, "client", &hb, 3000);

			say("client: read the %zu-byte banner fnv1a=%08x\n", n, hb);
		} else {
			say("client: NOT reading the server's banner (stays unread in the RMB)\n");
		}
		for (int i = 0; i < 400; i++) {
			if (write_pattern(fd, PAT_C, 16384, &off, &h, 0) < 16384) {
				say("client: write failed: %s\n", strerror(errno));
				break;
			}
			if (off % (128 * 1024) == 0)
				say("client: %zu bytes written so far (fnv1a of them %08x)\n", off, h);
			usleep(50000);
		}
		say("client: not killed?! wrote %zu bytes\n", off);
		close(fd);
	} else if (!strcmp(cs, "devkill")) {
		static char buf[4096];
		size_t total = 0;

		for (;;) {
			ssize_t r = read(fd, buf, sizeof(buf));

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				say("client: read returned %zd%s%s after %zu bytes\n", r, r < 0 ? ": " : " (EOF)",
				    r < 0 ? strerror(errno) : "", total);
				break;
			}
			h = fnv(h, buf, r);
			total += r;
			if (total % 1000 == 0)
				say("client: %zu bytes received (fnv1a %08x)\n", total, h);
		}
		say("client: RESULT received %zu bytes fnv1a=%08x\n", total, h);
		close(fd);
	} else if (!strcmp(cs, "linger0")) {
		ssize_t w = write_pattern(fd, PAT_C, 300000, &off, &h, 0);

		say("client: write(300000) returned %zd, fnv1a=%08x; close() right now\n", w, h);
		close(fd);
		say("client: close() returned\n");
	} else {
		say("unknown case %s\n", cs);
		return 2;
	}
	return 0;
}

/* -------------------------------------------------------- ipsec, TFO -- */
static void set_xfrm_policy(int fd, const char *who)
{
	struct xfrm_userpolicy_info pol;

	/* per-socket policy without templates: "allow", nothing is encrypted,
	 * but the socket now has sk_policy[] set, which is all SMC checks */
	memset(&pol, 0, sizeof(pol));
	pol.sel.family = AF_INET;
	pol.lft.soft_byte_limit = XFRM_INF;
	pol.lft.hard_byte_limit = XFRM_INF;
	pol.lft.soft_packet_limit = XFRM_INF;
	pol.lft.hard_packet_limit = XFRM_INF;
	pol.dir = XFRM_POLICY_OUT;
	pol.action = XFRM_POLICY_ALLOW;
	pol.share = XFRM_SHARE_ANY;
	if (setsockopt(fd, IPPROTO_IP, IP_XFRM_POLICY, &pol, sizeof(pol)) < 0)
		die("setsockopt(IP_XFRM_POLICY)");
	say("%s: per-socket xfrm policy set (IP_XFRM_POLICY, dir=OUT, action=ALLOW, no templates)\n", who);
}

static int request_reply(int fd, const char *who, const char *msg)
{
	char reply[256];
	ssize_t r, got = 0;

	if (send(fd, msg, strlen(msg), MSG_NOSIGNAL) < 0)
		die("send");
	shutdown(fd, SHUT_WR);
	while ((r = read(fd, reply + got, sizeof(reply) - 1 - got)) > 0)
		got += r;
	reply[got] = 0;
	say("%s: sent %zu bytes fnv1a=%08x '%s'; reply: %s", who, strlen(msg),
	    fnv(FNV0, msg, strlen(msg)), msg, got ? reply : "(none)\n");
	close(fd);
	return 0;
}

static void serve_one(int fd)
{
	static char buf[65536];
	char reply[128];
	uint32_t h = FNV0;
	size_t total = 0;
	ssize_t r;

	hook();
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		h = fnv(h, buf, r);
		total += r;
	}
	snprintf(reply, sizeof(reply), "ACK %zu fnv1a=%08x\n", total, h);
	send(fd, reply, strlen(reply), MSG_NOSIGNAL);
	say("server: received %zu bytes fnv1a=%08x\n", total, h);
	close(fd);
}

static int plain_server(int port, int n, int ipsec)
{
	int lfd = smc_socket(), one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ipsec)
		set_xfrm_policy(lfd, "server");
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	if (listen(lfd, 8) < 0)
		die("listen");
	say("server: listening on port %d (AF_SMC)\n", port);
	for (int i = 0; i < n; i++)
		serve_one(accept_one(lfd));
	close(lfd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	t_start = now();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "bidir-server") && (argc == 4 || argc == 6)) {
		int lfd = listen_on(atoi(argv[2]), 4);

		if (argc == 6)
			bidir_chunk = atol(argv[4]), bidir_pause_ms = atoi(argv[5]);
		return bidir(accept_one(lfd), atol(argv[3]), "server", PAT_S);
	}
	if (!strcmp(m, "bidir-client") && (argc == 5 || argc == 7)) {
		if (argc == 7)
			bidir_chunk = atol(argv[5]), bidir_pause_ms = atoi(argv[6]);
		return bidir(connect_to(smc_socket(), argv[2], atoi(argv[3])), atol(argv[4]), "client", PAT_C);
	}
	if (!strcmp(m, "urg-server") && argc == 4)
		return urg_server(atoi(argv[2]), argv[3]);
	if (!strcmp(m, "urg-client") && argc == 5)
		return urg_client(argv[2], atoi(argv[3]), argv[4]);
	if (!strcmp(m, "abort-server") && (argc == 4 || argc == 5)) {
		if (argc == 5)
			abort_count = atoi(argv[4]);
		return abort_server(atoi(argv[2]), argv[3]);
	}
	if (!strcmp(m, "abort-client") && argc == 5)
		return abort_client(argv[2], atoi(argv[3]), argv[4]);
	if (!strcmp(m, "plain-server") && argc == 4)
		return plain_server(atoi(argv[2]), atoi(argv[3]), 0);
	if (!strcmp(m, "ipsec-server") && argc >= 3)
		return plain_server(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 1, 1);
	if (!strcmp(m, "ipsec-client") && argc == 4) {
		int fd = smc_socket();

		set_xfrm_policy(fd, "client");
		connect_to(fd, argv[2], atoi(argv[3]));
		hook();
		return request_reply(fd, "client", "client socket with a per-socket IPsec policy");
	}
	if (!strcmp(m, "fastopen-client") && argc == 4) {
		int fd = smc_socket(), one = 1;

		if (setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof(one)) < 0)
			die("setsockopt(TCP_FASTOPEN_CONNECT)");
		say("client: TCP_FASTOPEN_CONNECT set on the AF_SMC socket\n");
		connect_to(fd, argv[2], atoi(argv[3]));
		hook();
		return request_reply(fd, "client", "client socket with TCP_FASTOPEN_CONNECT");
	}
	fprintf(stderr, "usage: see the comment at the top of smcxfer.c\n");
	return 2;
}
