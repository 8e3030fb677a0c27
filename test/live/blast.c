// blast: paced UDP sender for the live-capture rate test (runs inside the test's network
// namespace, talks only to addresses on its lo).
//
//   blast SRC_IP SRC_PORT DST_IP DST_PORT RATE COUNT PAYLOADS
//
// Sends COUNT datagrams at RATE per second (sendmmsg batches, paced against the monotonic
// clock, sleeping when ahead: no busy wait), cycling through the payloads in the file
// PAYLOADS (records of u16 little-endian length + bytes: real RoCEv2 payloads, BTH..ICRC).
// A socket bound to DST_IP:DST_PORT receives them (never read; the kernel drops what does not
// fit), so no ICMP errors join the traffic. Prints one JSON line: sent, seconds, rate.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 32
#define MAX_PAYLOADS 65536

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int udp_bound(const char *ip, int port) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) { perror("socket"); exit(1); }
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) { fprintf(stderr, "bad address %s\n", ip); exit(1); }
  if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); exit(1); }
  return s;
}

int main(int argc, char **argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: blast SRC_IP SRC_PORT DST_IP DST_PORT RATE COUNT PAYLOADS\n");
    return 2;
  }
  const char *src = argv[1], *dst = argv[3];
  int sport = atoi(argv[2]), dport = atoi(argv[4]);
  double rate = atof(argv[5]);
  long count = atol(argv[6]);
  if (rate <= 0 || count <= 0) { fprintf(stderr, "rate and count must be > 0\n"); return 2; }

  FILE *f = fopen(argv[7], "rb");
  if (!f) { perror(argv[7]); return 1; }
  static uint8_t *pl[MAX_PAYLOADS];
  static size_t plen[MAX_PAYLOADS];
  int np = 0;
  uint8_t lenb[2];
  while (np < MAX_PAYLOADS && fread(lenb, 1, 2, f) == 2) {
    size_t n = (size_t)lenb[0] | ((size_t)lenb[1] << 8);
    pl[np] = malloc(n ? n : 1);
    if (fread(pl[np], 1, n, f) != n) break;
    plen[np++] = n;
  }
  fclose(f);
  if (np == 0) { fprintf(stderr, "no payloads in %s\n", argv[7]); return 1; }

  int rx = udp_bound(dst, dport);
  int rcv = 1 << 20;
  setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
  int tx = udp_bound(src, sport);
  struct sockaddr_in to = {0};
  to.sin_family = AF_INET;
  to.sin_port = htons((uint16_t)dport);
  inet_pton(AF_INET, dst, &to.sin_addr);

  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  long sent = 0;
  int next = 0;
  double t0 = now_s();
  while (sent < count) {
    double t = now_s();
    long due = (long)((t - t0) * rate) + 1;  // datagrams that should be out by now
    if (due > count) due = count;
    long n = due - sent;
    if (n <= 0) {
      // ahead of schedule: sleep until the next datagram is due
      double wait = (double)(sent + 1) / rate - (t - t0);
      if (wait > 0) {
        struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
        nanosleep(&ts, NULL);
      }
      continue;
    }
    if (n > BATCH) n = BATCH;
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)n);
    for (long i = 0; i < n; i++) {
      iov[i].iov_base = pl[next];
      iov[i].iov_len = plen[next];
      next = (next + 1) % np;
      msgs[i].msg_hdr.msg_name = &to;
      msgs[i].msg_hdr.msg_namelen = sizeof to;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int r = sendmmsg(tx, msgs, (unsigned)n, 0);
    if (r < 0) {
      if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN) continue;
      perror("sendmmsg");
      return 1;
    }
    // a partial batch: the rest is re-sent in the next round with the same payloads
    if (r < n) next = (int)(((long)next - (n - r) + (long)np * BATCH) % np);
    sent += r;
  }
  double secs = now_s() - t0;
  printf("{\"sent\":%ld,\"seconds\":%.6f,\"rate\":%.1f}\n", sent, secs, secs > 0 ? (double)sent / secs : 0.0);
  close(tx);
  close(rx);
  return 0;
}
