// uroce_sock: the one thing Node's dgram cannot do for the userspace RoCEv2 engine — open a
// UDP socket with IP options set before bind:
//   IP_MTU_DISCOVER = IP_PMTUDISC_DO  DF set and, as a consequence, IP ID 0 on every packet
//                                     (Linux picks ID 0 for DF packets of unconnected sockets
//                                     only when the socket does not "ignore DF", i.e. PMTUDISC
//                                     DO/PROBE). The ICRC covers the IP ID, so the engine must
//                                     know it: 0 is the only value it can know in advance.
//   IP_TOS                            DSCP/ECN of the QP's traffic class
//   IP_TTL                            hop limit of the QP's address vector
// The fd of a QP's send socket is handed to dgram.Socket#bind({ fd }) (public Node API).
//
// And the two per-datagram costs a JavaScript engine cannot avoid through dgram:
//   sendPackets  packets laid out back to back in one buffer, described by (offset, length,
//                segment size) triples, go out in sendmmsg(2) batches; a triple with a segment
//                size is one UDP GSO send (UDP_SEGMENT): the kernel cuts it into datagrams of
//                that size (the last may be shorter), so a 64 KiB RDMA WRITE crosses the
//                socket layer as 2 sends instead of 16.
//   recvStart    the engine's receive socket is read here, not by dgram: a libuv poll handle
//                on the fd, recvmmsg(2) into a caller-provided buffer of fixed-size slots, and
//                ONE JavaScript call per batch (count; lengths, sources, GRO segment sizes in
//                a caller-provided Int32Array). UDP_GRO is asked for, so a GSO send that stayed
//                whole (loopback) arrives as one datagram plus its segment size.
//                Opt-in busy polling (recvBusyPoll, round 16): the loop keeps polling recvmmsg
//                for a budget after the last packet instead of sleeping in epoll_wait (rx_spin).
// And the ICRC's arithmetic (round 14, a project decision: docs/uroce.md): the helper puts the
// ICRC on the packets sendPackets sends and checks the packets recvStart reads, with the
// project's one CRC-32 implementation (native/src/icrc.c, compiled in by icrc_arith.c). The
// protocol RULE stays in TypeScript and reaches this file as data: the BTH mask of the wire
// layer (icrcInit, once) and the CRC of the modelled IPv4 + UDP header in front of each packet
// (its "prefix": per packet in sendPackets' jobs, per (source, port, length, IP ID) in the
// receive loop's table, which only JavaScript fills). A packet whose ICRC is not the exact one
// for an entry of that table gets no verdict here: JavaScript checks it as before (ID recovery,
// the per-source policy, every counter). Headers, ICRC policy and every decision stay in
// TypeScript (endpoint/verbs/uroce/icrc.ts, engine.ts).
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/uio.h>
#include <sched.h>
#include "icrc_arith.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

static napi_value num(napi_env env, double v) {
  napi_value r;
  napi_create_double(env, v, &r);
  return r;
}

// openUdp4(address: string, port: number, tos: number, ttl: number, rcvbuf: number, sndbuf: number)
//   -> fd (>= 0) or -errno. Non-blocking, close-on-exec, PMTUDISC_DO.
static napi_value OpenUdp4(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6) return num(env, -EINVAL);
  char addr[64];
  size_t alen = 0;
  if (napi_get_value_string_utf8(env, argv[0], addr, sizeof addr, &alen) != napi_ok) return num(env, -EINVAL);
  int32_t port = 0, tos = 0, ttl = 0, rcvbuf = 0, sndbuf = 0;
  napi_get_value_int32(env, argv[1], &port);
  napi_get_value_int32(env, argv[2], &tos);
  napi_get_value_int32(env, argv[3], &ttl);
  napi_get_value_int32(env, argv[4], &rcvbuf);
  napi_get_value_int32(env, argv[5], &sndbuf);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) return num(env, -EINVAL);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return num(env, -errno);
  int v = IP_PMTUDISC_DO;
  if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof v) < 0) goto fail;
  v = tos & 0xff;
  if (setsockopt(fd, IPPROTO_IP, IP_TOS, &v, sizeof v) < 0) goto fail;
  if (ttl > 0) { v = ttl; if (setsockopt(fd, IPPROTO_IP, IP_TTL, &v, sizeof v) < 0) goto fail; }
  if (rcvbuf > 0) { v = rcvbuf; setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v); }
  if (sndbuf > 0) { v = sndbuf; setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v); }
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) goto fail;
  return num(env, fd);
fail: {
    int e = errno;
    close(fd);
    return num(env, -e);
  }
}

// boundPort(fd) -> local port or -errno
static napi_value BoundPort(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok) return num(env, -EINVAL);
  struct sockaddr_in sa;
  socklen_t l = sizeof sa;
  if (getsockname(fd, (struct sockaddr *)&sa, &l) < 0) return num(env, -errno);
  return num(env, ntohs(sa.sin_port));
}

// rcvbufOf(fd) -> SO_RCVBUF (what the kernel granted) or -errno
static napi_value RcvbufOf(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok) return num(env, -EINVAL);
  int v = 0;
  socklen_t l = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &l) < 0) return num(env, -errno);
  return num(env, v);
}

// closeFd(fd): for an fd that never reached a dgram socket
static napi_value CloseFd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) return num(env, -EINVAL);
  return num(env, close(fd) < 0 ? -errno : 0);
}


// gsoSupported(fd) -> 1 when the kernel knows UDP_SEGMENT (Linux >= 4.18), else 0.
static napi_value GsoSupported(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok) return num(env, 0);
  int v = 0;
  socklen_t l = sizeof v;
  return num(env, getsockopt(fd, SOL_UDP, UDP_SEGMENT, &v, &l) == 0 ? 1 : 0);
}

// ---------------------------------------------------------------------------------------
// ICRC arithmetic (see the header comment; the rule is TypeScript's)
// ---------------------------------------------------------------------------------------

// The mask laid over the first bytes of every IB packet (the BTH's variant fields forced to
// ones), zero-padded; given once by icrcInit. Process-wide: every engine registers the same
// wire-layer mask. mask_len 0: icrcInit not called, no ICRC work here.
static uint8_t bth_mask[UROCE_MASK_MAX];
static size_t bth_mask_len = 0;

static inline uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// The ICRC of the IB packet p[0, len) (BTH … 4-byte ICRC slot) behind headers whose CRC is `prefix`.
static inline uint32_t packet_icrc(uint32_t prefix, const uint8_t *p, size_t len) {
  return uroce_crc_masked(prefix, p, bth_mask, bth_mask_len, len - 4);
}

// icrcInit(mask: Uint8Array) -> true when the helper does the ICRC arithmetic from now on
// (false: a mask it cannot hold). Called once by the engine with the wire layer's BTH mask.
static napi_value IcrcInit(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_typedarray_type t;
  size_t len = 0, off = 0;
  void *data = NULL;
  napi_value ab, out;
  int ok = napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc >= 1 &&
           napi_get_typedarray_info(env, argv[0], &t, &len, &data, &ab, &off) == napi_ok && t == napi_uint8_array &&
           len > 0 && len <= UROCE_MASK_MAX;
  if (ok) {
    uroce_crc_setup(env);
    for (size_t i = 0; i < UROCE_MASK_MAX; i++) bth_mask[i] = i < len ? ((const uint8_t *)data)[i] : 0;
    bth_mask_len = len;
  }
  napi_get_boolean(env, ok, &out);
  return out;
}

// sendPackets(fd, addr (IPv4, host order), port, buf: Uint8Array, desc: Int32Array, n[, nJobs, jobsAt])
//   -> number of descriptors sent (fewer when the socket buffer is full: EAGAIN) or -errno
//   when the first one failed. desc[3i] = offset in buf, desc[3i+1] = length, desc[3i+2] =
//   GSO segment size (0: one datagram).
//   ICRC jobs (after icrcInit): desc[jobsAt + 3j …] = offset of an IB packet in buf, its length,
//   the CRC of the headers in front of it (int32); each packet gets its ICRC in its last four
//   bytes (least-significant byte first) before anything is sent, so every packet of the call
//   carries its ICRC even when only some leave in it (EAGAIN: the engine sends the rest
//   another way). A job outside buf: -EINVAL, nothing sent.
#define SBATCH 64
static napi_value SendPackets(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6) return num(env, -EINVAL);
  int32_t fd = -1, port = 0, n = 0, nJobs = 0, jobsAt = 0;
  uint32_t addr = 0;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_uint32(env, argv[1], &addr) != napi_ok ||
      napi_get_value_int32(env, argv[2], &port) != napi_ok || napi_get_value_int32(env, argv[5], &n) != napi_ok) return num(env, -EINVAL);
  if (argc >= 8 && (napi_get_value_int32(env, argv[6], &nJobs) != napi_ok || napi_get_value_int32(env, argv[7], &jobsAt) != napi_ok)) return num(env, -EINVAL);
  napi_typedarray_type bt, dt;
  size_t blen = 0, dlen = 0, boff = 0, doff = 0;
  void *bdata = NULL, *ddata = NULL;
  napi_value ab;
  if (napi_get_typedarray_info(env, argv[3], &bt, &blen, &bdata, &ab, &boff) != napi_ok || bt != napi_uint8_array) return num(env, -EINVAL);
  if (napi_get_typedarray_info(env, argv[4], &dt, &dlen, &ddata, &ab, &doff) != napi_ok || dt != napi_int32_array) return num(env, -EINVAL);
  if (n < 0 || (size_t)n * 3 > dlen) return num(env, -EINVAL);
  const int32_t *desc = (const int32_t *)ddata;
  if (nJobs > 0) {
    if (bth_mask_len == 0 || jobsAt < 0 || (size_t)jobsAt + (size_t)nJobs * 3 > dlen) return num(env, -EINVAL);
    const int32_t *j = desc + jobsAt;
    for (int32_t k = 0; k < nJobs; k++, j += 3)
      if (j[0] < 0 || j[1] < (int32_t)bth_mask_len + 4 || (size_t)j[0] + (size_t)j[1] > blen) return num(env, -EINVAL);
    j = desc + jobsAt;
    for (int32_t k = 0; k < nJobs; k++, j += 3) {
      uint8_t *p = (uint8_t *)bdata + j[0];
      uint32_t c = packet_icrc((uint32_t)j[2], p, (size_t)j[1]);
      uint8_t *t = p + j[1] - 4;
      t[0] = (uint8_t)c; t[1] = (uint8_t)(c >> 8); t[2] = (uint8_t)(c >> 16); t[3] = (uint8_t)(c >> 24);
    }
  }
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(addr);
  struct mmsghdr msgs[SBATCH];
  struct iovec iov[SBATCH];
  union { char buf[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; } ctrl[SBATCH];
  int32_t done = 0;
  while (done < n) {
    int k = n - done < SBATCH ? n - done : SBATCH;
    for (int i = 0; i < k; i++) {
      const int32_t *d = desc + 3 * (done + i);
      if (d[0] < 0 || d[1] < 0 || (size_t)d[0] + (size_t)d[1] > blen) return num(env, done > 0 ? done : -EINVAL);
      iov[i].iov_base = (uint8_t *)bdata + d[0];
      iov[i].iov_len = (size_t)d[1];
      memset(&msgs[i], 0, sizeof msgs[i]);
      msgs[i].msg_hdr.msg_name = &sa;
      msgs[i].msg_hdr.msg_namelen = sizeof sa;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      if (d[2] > 0 && d[1] > d[2]) {
        memset(ctrl[i].buf, 0, sizeof ctrl[i].buf);
        msgs[i].msg_hdr.msg_control = ctrl[i].buf;
        msgs[i].msg_hdr.msg_controllen = sizeof ctrl[i].buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = (uint16_t)d[2];
        memcpy(CMSG_DATA(c), &seg, sizeof seg);
      }
    }
    int r = sendmmsg(fd, msgs, (unsigned)k, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) break;
      return num(env, done > 0 ? (double)done : (double)-errno);
    }
    done += r;
    if (r < k) break;
  }
  return num(env, done);
}

// ---------------------------------------------------------------------------------------
// Batched receive
// ---------------------------------------------------------------------------------------

typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref cb, after, bufRef, metaRef, turnRef, self;
  napi_async_context actx;
  int fd;
  int slots;
  size_t slotSize;
  uint8_t *buf;
  int32_t *meta;
  // Shared with the engine (recvStart's `turn`, optional): turn[0] = 1 while a batch's callback
  // and its microtasks run (the loop's turn), turn[1] = 1 when the engine deferred a transmit
  // flush to after() in that turn. No flag: after() is not called. NULL: after() every batch.
  int32_t *turn;
  // ICRC verdicts (recvStart's `icrc` and `table`, optional; NULL: none, JavaScript checks
  // every packet): vout[i * vmax + k] for packet k of datagram i (see rx_icrc), and the
  // prefix table, 4 cells per entry (source IPv4, source port << 16 | IB length, IP ID,
  // prefix CRC), tmask + 1 entries, filled by JavaScript only.
  int32_t *vout;
  int vmax;
  int32_t *table;
  uint32_t tmask;
  napi_ref voutRef, tableRef;
  int gro;
  int stopped;
  // Busy polling (recvBusyPoll; 0 = off, the default: see rx_spin): the budget, when the last
  // packet came or left (recvSpin), and the idle handle that resumes polling after the loop.
  uint64_t spin_ns;
  int spin_yield;
  uint64_t last_ns;
  uv_idle_t idle;
  // what the polling did (recvSpinStats): slices, batches they delivered, polls that found
  // nothing, slices ended because the thread lost its CPU
  double spin_slices, spin_batches, spin_empty, spin_preempted, spin_skipped;
  uint64_t quiet_until; // after a slice lost the CPU: no polling before this time
  uint64_t backoff_ns;  // how long that is (recvBusyPoll; SPIN_BACKOFF_NS by default)
  int handles; // libuv handles still to close before the rx_t goes (poll, idle)
  struct mmsghdr *msgs;
  struct iovec *iov;
  struct sockaddr_in *from;
  char *ctrl;
} rx_t;

#define CTRL_SZ CMSG_SPACE(sizeof(int))
// Datagrams per readable event before libuv gets control back (other handles, timers).
#define MAX_ROUNDS 8

static void rx_free(rx_t *r) {
  free(r->msgs);
  free(r->iov);
  free(r->from);
  free(r->ctrl);
  free(r);
}

static void on_closed(uv_handle_t *h) {
  rx_t *r = (rx_t *)h->data;
  if (--r->handles > 0) return; // the other handle (poll, idle) is still closing
  // released here, not in recvStop: recvStop may run inside this loop's own callback
  // (a completion handler closing the device), where the callback and its context are in use
  napi_async_destroy(r->env, r->actx);
  napi_delete_reference(r->env, r->cb);
  if (r->after) napi_delete_reference(r->env, r->after);
  if (r->turnRef) napi_delete_reference(r->env, r->turnRef);
  if (r->voutRef) napi_delete_reference(r->env, r->voutRef);
  if (r->tableRef) napi_delete_reference(r->env, r->tableRef);
  napi_delete_reference(r->env, r->bufRef);
  napi_delete_reference(r->env, r->metaRef);
  napi_delete_reference(r->env, r->self);
  rx_free(r);
}

// The table entry of a (source, port << 16 | length, IP ID) key: a hash JavaScript never
// computes (a miss tells it the entry to fill).
static inline uint32_t prefix_slot(const rx_t *r, uint32_t src, uint32_t w1, uint32_t id) {
  uint32_t h = src * 0x9e3779b1u ^ w1 * 0x85ebca77u ^ id * 0xc2b2ae3du;
  return (h ^ (h >> 15)) & r->tmask;
}

// The verdict on one IB packet p[0, len) from src:port, k-th in its datagram (a GRO datagram's
// packets carry IP IDs 0, 1, 2 … from a GSO sender; the same order of tries as icrc.ts' check:
// the hinted ID k, then ID 0):
//   1   its ICRC is the exact one for ID k;  2   for ID 0 (k > 0);
//   0   neither (or too short): JavaScript checks it (ID recovery, its source policy);
//  <0   a key without a table entry: -(1 + 2 * entry + (the key's ID is 0 though k > 0)),
//       JavaScript checks it and fills that entry.
static int32_t rx_verdict(const rx_t *r, const uint8_t *p, int32_t len, int32_t src, int32_t port, int k) {
  if (len < (int32_t)bth_mask_len + 4 || len > 0xffff) return 0;
  uint32_t got = le32(p + len - 4), w1 = (uint32_t)port << 16 | (uint32_t)len;
  int32_t miss = 0;
  for (int pass = 0; pass < 2; pass++) {
    uint32_t id = pass == 0 ? (uint32_t)k : 0;
    if (pass == 1 && k == 0) break;
    uint32_t slot = prefix_slot(r, (uint32_t)src, w1, id);
    const int32_t *e = r->table + 4 * (size_t)slot;
    if (e[0] == src && (uint32_t)e[1] == w1 && (uint32_t)e[2] == id) {
      if (packet_icrc((uint32_t)e[3], p, (size_t)len) == got) return pass == 0 ? 1 : 2;
    } else if (miss == 0) {
      miss = -(int32_t)(1 + 2 * slot + (uint32_t)pass);
    }
  }
  return miss;
}

// Verdicts for the packets of datagram i, in the cells JavaScript reads for it: cell 0 always
// (a datagram too short for a packet still has one), one per GRO segment up to vmax (the
// engine checks the rest itself).
static void rx_icrc(const rx_t *r, int i) {
  const int32_t *m = r->meta + 4 * i;
  int32_t *v = r->vout + (size_t)i * (size_t)r->vmax;
  int32_t len = m[0], seg = m[3];
  v[0] = 0;
  if (len <= 0) return;
  if (seg <= 0 || len <= seg) seg = len;
  const uint8_t *base = r->buf + (size_t)i * r->slotSize;
  for (int32_t o = 0, k = 0; o < len && k < r->vmax; o += seg, k++)
    v[k] = rx_verdict(r, base + o, len - o < seg ? len - o : seg, m[1], m[2], k);
}

// Slots made ready for one recvmmsg(2) (the kernel writes names, control and lengths back).
static void rx_prepare(rx_t *r) {
  for (int i = 0; i < r->slots; i++) {
    memset(&r->msgs[i].msg_hdr, 0, sizeof r->msgs[i].msg_hdr);
    r->iov[i].iov_base = r->buf + (size_t)i * r->slotSize;
    r->iov[i].iov_len = r->slotSize;
    r->msgs[i].msg_hdr.msg_iov = &r->iov[i];
    r->msgs[i].msg_hdr.msg_iovlen = 1;
    r->msgs[i].msg_hdr.msg_name = &r->from[i];
    r->msgs[i].msg_hdr.msg_namelen = sizeof r->from[i];
    r->msgs[i].msg_hdr.msg_control = r->ctrl + (size_t)i * CTRL_SZ;
    r->msgs[i].msg_hdr.msg_controllen = CTRL_SZ;
    r->msgs[i].msg_len = 0;
  }
}

// One batch of n datagrams to JavaScript: meta (and ICRC verdicts), cb(n), after() when asked.
// Returns 1 when the loop must stop reading now (a callback threw, or its reference is gone).
static int rx_deliver(rx_t *r, int n) {
  napi_env env = r->env;
  for (int i = 0; i < n; i++) {
    int32_t *m = r->meta + 4 * i;
    struct msghdr *mh = &r->msgs[i].msg_hdr;
    m[0] = (mh->msg_flags & MSG_TRUNC) ? -1 : (int32_t)r->msgs[i].msg_len;
    m[1] = (int32_t)ntohl(r->from[i].sin_addr.s_addr);
    m[2] = ntohs(r->from[i].sin_port);
    m[3] = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int seg = 0;
        memcpy(&seg, CMSG_DATA(c), sizeof seg);
        m[3] = seg;
      }
    }
    if (r->vout) rx_icrc(r, i);
  }
  napi_value cb, recv, arg, result;
  if (napi_get_reference_value(env, r->cb, &cb) != napi_ok || napi_get_reference_value(env, r->self, &recv) != napi_ok) return 1;
  napi_create_int32(env, n, &arg);
  if (r->turn) { r->turn[0] = 1; r->turn[1] = 0; }
  // make_callback: after the call Node runs the nextTick and microtask queues, as it does
  // after dgram's 'message' (the engine's transmit batches are flushed there).
  napi_status st = napi_make_callback(env, r->actx, recv, cb, 1, &arg, &result);
  int failed = st == napi_pending_exception;
  if (failed) {
    napi_value ex;
    napi_get_and_clear_last_exception(env, &ex);
    napi_fatal_exception(env, ex);
  }
  // after(): once the batch's microtasks have run (the application has reacted to its
  // completions), the engine sends what they posted — the answer and the batch's ACKs — in
  // this same callback, instead of one event-loop phase later (setImmediate: back into the
  // loop, the check phase, Node's immediate queue: a few µs per leg).
  // Called after a failed cb too: the engine ends its receive turn there. With the shared
  // cells only when the engine deferred a flush in this turn: an answer the batch's own
  // callback wrote was sent at the batch's end (one JavaScript call per batch instead of
  // two); a write from a microtask, or the ACK of a batch nothing answered yet, still flags
  // one. The turn ends here, before after(): a flush asked for later (in after()'s own
  // microtasks, a timer, another socket) takes the ordinary path and never waits for a call
  // that does not come.
  int want = 1;
  if (r->turn) { want = r->turn[1] != 0; r->turn[0] = 0; r->turn[1] = 0; }
  if (r->after && !r->stopped && want) {
    napi_value af;
    if (napi_get_reference_value(env, r->after, &af) == napi_ok
        && napi_make_callback(env, r->actx, recv, af, 0, NULL, &result) == napi_pending_exception) {
      napi_value ex;
      napi_get_and_clear_last_exception(env, &ex);
      napi_fatal_exception(env, ex);
      failed = 1;
    }
  }
  return failed;
}

// ---------------------------------------------------------------------------------------
// Busy polling (round 16; opt-in, recvBusyPoll: a budget in µs, 0 = off, the default)
// ---------------------------------------------------------------------------------------
// RDMA latency tools poll their CQ instead of sleeping (perftest's ib_*_lat unless -e), and
// Linux offers the same trade for sockets (SO_BUSY_POLL): CPU for the wake-up. Here: after a
// batch the loop does not go back to epoll_wait(2) when recvmmsg says EAGAIN; it polls
// recvmmsg(MSG_DONTWAIT) until `spin_ns` have passed since the last packet received (or sent:
// recvSpin, called by the engine when it sends outside a receive batch, as perftest polls
// after a post), handling every batch exactly as the event path does (rx_deliver).
//
// One call polls for at most SPIN_SLICE_NS, then returns to the event loop, even while packets
// keep coming and the budget is not used up: timers (retransmission, keepalives, smcperf's
// intervals and its end of test), other sockets (the TCP control connection), signals and the
// check phase wait for the loop, and a loop that never got control back would starve them
// (and never see that the process should exit). 0.5 ms keeps a timer at most that late (Node's
// timers count in ms) and costs one pass of the loop (a few µs) per slice. When the slice ends
// inside the budget, an idle handle (unref'd: it never keeps the process alive) makes the
// loop's next poll non-blocking and calls rx_spin again after the loop's other work.
#define SPIN_SLICE_NS 500000u
// Largest budget accepted (µs): 10 s of polling after the last packet.
#define SPIN_MAX_US 10000000
// Polling only pays while the thread keeps its CPU. An empty poll takes ~1-2 µs; when two of
// them are this far apart the scheduler ran something else here meanwhile (another process:
// on a machine with more runnable threads than CPUs a poller takes the peer's or another
// program's CPU, and a packet that comes while it is descheduled waits for its next turn,
// where a sleeping thread would have been woken with preference). Like the kernel's busy poll
// loop, which ends on need_resched(), the slice ends there and the loop sleeps in epoll_wait
// until the next packet (polling again after a back-off, below).
#define SPIN_PREEMPT_NS 100000u
// And after such a slice the loop stays event-driven for a while: on a machine that is short of
// CPUs this keeps happening, and every poll that loses its CPU holds the packets that come
// meanwhile for the scheduler's next turn (milliseconds: rr p99 10-50 × TCP's in round 16's
// first measurements) where a sleeping thread would have been woken at once. Polling resumes
// on the first readable event after the back-off (recvBusyPoll's 4th argument; 0: none).
// 5 ms: same-run pairs at load ~3 gave rr p50 1.42 x TCP with 5 ms, 1.56 with 50 ms, 1.38 with
// none (docs/uroce.md round 16); a short back-off keeps a brief preemption from switching
// polling off for long, and still takes at most 200 polls a second into a busy machine.
#define SPIN_BACKOFF_NS 5000000u

static void on_idle(uv_idle_t *h);

static void rx_spin(rx_t *r) {
  uv_loop_t *loop = r->poll.loop;
  uint64_t now = uv_hrtime(), end = now + SPIN_SLICE_NS, prev = now;
  int ready = 0; // slots set up; a recvmmsg that found nothing leaves them as they were
  int preempted = 0;
  r->spin_slices++;
  while (!r->stopped) {
    if (!ready) { rx_prepare(r); ready = 1; }
    int n = recvmmsg(r->fd, r->msgs, (unsigned)r->slots, MSG_DONTWAIT, NULL);
    if (n > 0) {
      ready = 0;
      // the loop's cached clock is what Node's timers start from: kept current while polling,
      // so a timer set in a callback is not due up to a slice early
      uv_update_time(loop);
      napi_handle_scope scope;
      if (napi_open_handle_scope(r->env, &scope) != napi_ok) break;
      int stop = rx_deliver(r, n);
      napi_close_handle_scope(r->env, scope);
      now = uv_hrtime();
      r->last_ns = now;
      r->spin_batches++;
      if (stop) break;
    } else {
      // EAGAIN: nothing yet; another error (n == 0 does not happen with vlen > 0) is the
      // event path's to show: the loop polls the fd again
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
      r->spin_empty++;
      // Let a thread waiting for this CPU run first: the peer, when both ends share a CPU (two
      // pollers on a loaded 2-vCPU machine often do), has the answer to produce — pure polling
      // made every leg wait for the other side's budget to run out. With nothing else runnable
      // here sched_yield returns at once. Time given away counts as time the CPU was lost:
      // a short turn (the peer's batch) keeps polling, a long one (another program's time
      // slice) ends it below.
      if (r->spin_yield) sched_yield();
      now = uv_hrtime();
      if (now - prev >= SPIN_PREEMPT_NS) { preempted = 1; r->spin_preempted++; r->quiet_until = now + r->backoff_ns; break; }
    }
    prev = now;
    if ((int64_t)(now - r->last_ns) >= (int64_t)r->spin_ns || (int64_t)(now - end) >= 0) break;
  }
  if (!r->stopped && !preempted && r->spin_ns > 0 && (int64_t)(now - r->last_ns) < (int64_t)r->spin_ns) uv_idle_start(&r->idle, on_idle);
  else uv_idle_stop(&r->idle);
}

static void on_idle(uv_idle_t *h) {
  rx_t *r = (rx_t *)h->data;
  if (r->stopped || r->spin_ns == 0) { uv_idle_stop(h); return; }
  rx_spin(r);
}

static void on_readable(uv_poll_t *h, int status, int events) {
  rx_t *r = (rx_t *)h->data;
  (void)events;
  if (r->stopped) return;
  if (r->spin_ns > 0 && status == 0) {
    if ((int64_t)(uv_hrtime() - r->quiet_until) >= 0) { rx_spin(r); return; }
    r->spin_skipped++; // backing off: this event takes the event path below
  }
  napi_env env = r->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  for (int round = 0; round < MAX_ROUNDS && !r->stopped && status == 0; round++) {
    rx_prepare(r);
    int n = recvmmsg(r->fd, r->msgs, (unsigned)r->slots, MSG_DONTWAIT, NULL);
    if (n <= 0) break; // EAGAIN (nothing more) or an error the next event will show again
    if (rx_deliver(r, n) || n < r->slots) break;
  }
  napi_close_handle_scope(env, scope);
}

static void rx_finalize(napi_env env, void *data, void *hint) {
  (void)env; (void)data; (void)hint;
  // the rx_t lives until its poll handle is closed (recvStop), not with the JS object
}

// recvStart(fd, buf: Uint8Array, meta: Int32Array, slots, slotSize, gro, cb[, after[, turn]]) -> handle
//   object (pass to recvStop) or a negative errno. Takes ownership of fd (closed by recvStop).
//   cb(n) is called with n datagrams in slots 0..n-1 of buf; meta[4i..4i+3] = length (-1 if
//   truncated), source IPv4 (host order, signed), source port, GRO segment size (0: one
//   datagram). The buffers are reused as soon as cb returns. after() (optional) is called
//   after each cb, once the microtasks cb led to have run; with `turn` (Int32Array of 2, see
//   rx_t) only when turn[1] was set during that cb and its microtasks.
//   icrc (Int32Array, a multiple of slots: vmax cells per datagram) and table (Int32Array of
//   4 × a power of two cells), optional, after icrcInit: the loop writes an ICRC verdict per
//   packet (rx_verdict) before cb; the handle's `icrc` says whether it does.
static napi_value RecvStart(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value argv[11];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 7) return num(env, -EINVAL);
  int32_t fd = -1, slots = 0, slotSize = 0;
  bool gro = false;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int32(env, argv[3], &slots) != napi_ok ||
      napi_get_value_int32(env, argv[4], &slotSize) != napi_ok || napi_get_value_bool(env, argv[5], &gro) != napi_ok) return num(env, -EINVAL);
  if (fd < 0 || slots < 1 || slots > 1024 || slotSize < 64) return num(env, -EINVAL);
  napi_typedarray_type bt, mt;
  size_t blen = 0, mlen = 0, off = 0;
  void *bdata = NULL, *mdata = NULL;
  napi_value ab;
  if (napi_get_typedarray_info(env, argv[1], &bt, &blen, &bdata, &ab, &off) != napi_ok || bt != napi_uint8_array) return num(env, -EINVAL);
  if (napi_get_typedarray_info(env, argv[2], &mt, &mlen, &mdata, &ab, &off) != napi_ok || mt != napi_int32_array) return num(env, -EINVAL);
  if (blen < (size_t)slots * (size_t)slotSize || mlen < (size_t)slots * 4) return num(env, -EINVAL);
  napi_valuetype ct;
  if (napi_typeof(env, argv[6], &ct) != napi_ok || ct != napi_function) return num(env, -EINVAL);
  bool hasAfter = argc >= 8 && napi_typeof(env, argv[7], &ct) == napi_ok && ct == napi_function;
  int32_t *turn = NULL;
  napi_valuetype tty = napi_undefined;
  if (hasAfter && argc >= 9 && napi_typeof(env, argv[8], &tty) == napi_ok && tty != napi_undefined && tty != napi_null) {
    napi_typedarray_type tt;
    size_t tlen = 0;
    void *tdata = NULL;
    if (napi_get_typedarray_info(env, argv[8], &tt, &tlen, &tdata, &ab, &off) != napi_ok || tt != napi_int32_array || tlen < 2) return num(env, -EINVAL);
    turn = tdata;
  }
  int32_t *vout = NULL, *table = NULL;
  size_t vlen = 0, tlen = 0;
  if (argc >= 11 && bth_mask_len > 0) {
    napi_valuetype vty = napi_undefined, tty2 = napi_undefined;
    napi_typeof(env, argv[9], &vty);
    napi_typeof(env, argv[10], &tty2);
    if (vty == napi_object && tty2 == napi_object) {
      napi_typedarray_type vt, tt;
      void *vd = NULL, *td = NULL;
      if (napi_get_typedarray_info(env, argv[9], &vt, &vlen, &vd, &ab, &off) != napi_ok || vt != napi_int32_array ||
          napi_get_typedarray_info(env, argv[10], &tt, &tlen, &td, &ab, &off) != napi_ok || tt != napi_int32_array ||
          vlen < (size_t)slots || tlen < 4 || ((tlen / 4) & (tlen / 4 - 1)) != 0) return num(env, -EINVAL);
      vout = vd;
      table = td;
    }
  }
  uv_loop_t *loop = NULL;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || !loop) return num(env, -EINVAL);

  rx_t *r = calloc(1, sizeof *r);
  if (!r) return num(env, -ENOMEM);
  r->msgs = calloc((size_t)slots, sizeof *r->msgs);
  r->iov = calloc((size_t)slots, sizeof *r->iov);
  r->from = calloc((size_t)slots, sizeof *r->from);
  r->ctrl = calloc((size_t)slots, CTRL_SZ);
  if (!r->msgs || !r->iov || !r->from || !r->ctrl) { rx_free(r); return num(env, -ENOMEM); }
  r->env = env;
  r->fd = fd;
  r->slots = slots;
  r->slotSize = (size_t)slotSize;
  r->buf = bdata;
  r->meta = mdata;
  r->turn = turn;
  if (vout) {
    r->vout = vout;
    r->vmax = (int)(vlen / (size_t)slots);
    r->table = table;
    r->tmask = (uint32_t)(tlen / 4 - 1);
  }
  if (gro) {
    int one = 1;
    r->gro = setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
  }
  napi_value self, name;
  napi_create_object(env, &self);
  napi_value groV;
  napi_get_boolean(env, r->gro != 0, &groV);
  napi_set_named_property(env, self, "gro", groV);
  // tells the caller this build calls after() (an older one ignores the argument)
  napi_value afterV;
  napi_get_boolean(env, hasAfter, &afterV);
  napi_set_named_property(env, self, "after", afterV);
  // and that it reads the turn cells (an older one calls after() every batch)
  napi_value turnV;
  napi_get_boolean(env, turn != NULL, &turnV);
  napi_set_named_property(env, self, "turn", turnV);
  // and that it writes ICRC verdicts (an older one ignores the arguments)
  napi_value icrcV;
  napi_get_boolean(env, vout != NULL, &icrcV);
  napi_set_named_property(env, self, "icrc", icrcV);
  napi_wrap(env, self, r, rx_finalize, NULL, NULL);
  napi_create_reference(env, argv[6], 1, &r->cb);
  if (hasAfter) napi_create_reference(env, argv[7], 1, &r->after);
  if (turn) napi_create_reference(env, argv[8], 1, &r->turnRef);
  if (vout) {
    napi_create_reference(env, argv[9], 1, &r->voutRef);
    napi_create_reference(env, argv[10], 1, &r->tableRef);
  }
  napi_create_reference(env, argv[1], 1, &r->bufRef);
  napi_create_reference(env, argv[2], 1, &r->metaRef);
  napi_create_reference(env, self, 1, &r->self);
  napi_create_string_utf8(env, "uroce:recv", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &r->actx);
  if (uv_poll_init(loop, &r->poll, fd) != 0) {
    napi_async_destroy(env, r->actx);
    napi_delete_reference(env, r->cb); if (r->after) napi_delete_reference(env, r->after); if (r->turnRef) napi_delete_reference(env, r->turnRef); if (r->voutRef) napi_delete_reference(env, r->voutRef); if (r->tableRef) napi_delete_reference(env, r->tableRef); napi_delete_reference(env, r->bufRef); napi_delete_reference(env, r->metaRef); napi_delete_reference(env, r->self);
    napi_remove_wrap(env, self, NULL);
    rx_free(r);
    return num(env, -EINVAL);
  }
  r->poll.data = r;
  // busy polling's idle handle (stopped until a budget is set and a slice ends inside it);
  // unref'd: only the poll handle decides whether the loop keeps the process alive
  uv_idle_init(loop, &r->idle);
  r->idle.data = r;
  uv_unref((uv_handle_t *)&r->idle);
  r->handles = 2;
  uv_poll_start(&r->poll, UV_READABLE, on_readable);
  return self;
}

// recvStop(handle): stop reading and close the fd at once; the rest is freed when libuv has
// closed the handle. A second call returns -EINVAL.
static napi_value RecvStop(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1) return num(env, -EINVAL);
  rx_t *r = NULL;
  if (napi_remove_wrap(env, argv[0], (void **)&r) != napi_ok || !r) return num(env, -EINVAL);
  r->stopped = 1;
  uv_poll_stop(&r->poll);
  uv_idle_stop(&r->idle);
  // the fd goes now (libuv no longer polls it), so the address can be bound again at once
  close(r->fd);
  r->fd = -1;
  uv_close((uv_handle_t *)&r->poll, on_closed);
  uv_close((uv_handle_t *)&r->idle, on_closed);
  return num(env, 0);
}

// recvBusyPoll(handle, us[, yield[, backoffMs]]) -> the budget now in force (µs, clamped to
//   0 … SPIN_MAX_US) or -EINVAL. 0 (the default) turns busy polling off: the loop is
//   event-driven, as before. yield (default true): sched_yield(2) after each empty poll.
//   backoffMs (default SPIN_BACKOFF_NS, at most 10 s): event-driven for that long after a slice
//   that lost its CPU.
static napi_value RecvBusyPoll(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  rx_t *r = NULL;
  double us = 0, backoffMs = SPIN_BACKOFF_NS / 1e6;
  bool yield = true;
  if (argc >= 3) napi_get_value_bool(env, argv[2], &yield);
  if (argc >= 4 && (napi_get_value_double(env, argv[3], &backoffMs) != napi_ok || !(backoffMs >= 0))) return num(env, -EINVAL);
  if (backoffMs > 10000) backoffMs = 10000;
  if (argc < 2 || napi_unwrap(env, argv[0], (void **)&r) != napi_ok || !r || r->stopped ||
      napi_get_value_double(env, argv[1], &us) != napi_ok || !(us >= 0)) return num(env, -EINVAL);
  if (us > SPIN_MAX_US) us = SPIN_MAX_US;
  r->spin_ns = (uint64_t)us * 1000u;
  r->spin_yield = yield;
  r->backoff_ns = (uint64_t)(backoffMs * 1e6);
  r->quiet_until = 0;
  if (r->spin_ns == 0) uv_idle_stop(&r->idle);
  return num(env, (double)(r->spin_ns / 1000u));
}

// recvSpinStats(handle) -> [slices, batches, empty polls, slices ended by preemption, readable
//   events taken by the event path while backing off] of the busy polling so far (all 0 while
//   it is off), or -EINVAL.
static napi_value RecvSpinStats(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  rx_t *r = NULL;
  if (argc < 1 || napi_unwrap(env, argv[0], (void **)&r) != napi_ok || !r) return num(env, -EINVAL);
  const double v[5] = { r->spin_slices, r->spin_batches, r->spin_empty, r->spin_preempted, r->spin_skipped };
  napi_create_array_with_length(env, 5, &out);
  for (uint32_t i = 0; i < 5; i++) napi_set_element(env, out, i, num(env, v[i]));
  return out;
}

// recvSpin(handle): something was just sent outside a receive batch (a request from a timer,
// the first of a test): with a budget, poll for the answer instead of sleeping until it comes
// (from the loop's next pass; the budget counts from now). Without one: nothing.
static napi_value RecvSpin(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  rx_t *r = NULL;
  if (argc < 1 || napi_unwrap(env, argv[0], (void **)&r) != napi_ok || !r) return num(env, -EINVAL);
  if (r->stopped || r->spin_ns == 0) return num(env, 0);
  r->last_ns = uv_hrtime();
  if ((int64_t)(r->last_ns - r->quiet_until) < 0) return num(env, 0); // backing off
  uv_idle_start(&r->idle, on_idle);
  return num(env, 1);
}

// recvRef(handle, ref): keep the event loop alive while open (default) or not.
static napi_value RecvRef(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  rx_t *r = NULL;
  bool ref = true;
  if (argc < 2 || napi_unwrap(env, argv[0], (void **)&r) != napi_ok || !r) return num(env, -EINVAL);
  napi_get_value_bool(env, argv[1], &ref);
  if (ref) uv_ref((uv_handle_t *)&r->poll);
  else uv_unref((uv_handle_t *)&r->poll);
  return num(env, 0);
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor d[] = {
    { "openUdp4", NULL, OpenUdp4, NULL, NULL, NULL, napi_default, NULL },
    { "boundPort", NULL, BoundPort, NULL, NULL, NULL, napi_default, NULL },
    { "closeFd", NULL, CloseFd, NULL, NULL, NULL, napi_default, NULL },
    { "sendPackets", NULL, SendPackets, NULL, NULL, NULL, napi_default, NULL },
    { "gsoSupported", NULL, GsoSupported, NULL, NULL, NULL, napi_default, NULL },
    { "recvStart", NULL, RecvStart, NULL, NULL, NULL, napi_default, NULL },
    { "recvStop", NULL, RecvStop, NULL, NULL, NULL, napi_default, NULL },
    { "rcvbufOf", NULL, RcvbufOf, NULL, NULL, NULL, napi_default, NULL },
    { "recvRef", NULL, RecvRef, NULL, NULL, NULL, napi_default, NULL },
    { "recvBusyPoll", NULL, RecvBusyPoll, NULL, NULL, NULL, napi_default, NULL },
    { "recvSpin", NULL, RecvSpin, NULL, NULL, NULL, napi_default, NULL },
    { "recvSpinStats", NULL, RecvSpinStats, NULL, NULL, NULL, napi_default, NULL },
    { "icrcInit", NULL, IcrcInit, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof d / sizeof d[0], d);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
