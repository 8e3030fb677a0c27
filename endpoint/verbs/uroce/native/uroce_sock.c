// uroce_sock: the one thing Node's dgram cannot do for the userspace RoCEv2 engine — open a
// UDP socket with IP options set before bind:
//   IP_MTU_DISCOVER = IP_PMTUDISC_DO  DF set and, as a consequence, IP ID 0 on every packet
//                                     (Linux picks ID 0 for DF packets of unconnected sockets
//                                     only when the socket does not "ignore DF", i.e. PMTUDISC
//                                     DO/PROBE). The ICRC covers the IP ID, so the engine must
//                                     know it: 0 is the only value it can know in advance.
//   IP_TOS                            DSCP/ECN of the QP's traffic class
//   IP_TTL                            hop limit of the QP's address vector
// The fd is handed to dgram.Socket#bind({ fd }) (public Node API); nothing else lives here.
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/uio.h>

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

// sendBatch(fd, address, port, buffers[]) -> datagrams sent (0 when the socket buffer is
// full: EAGAIN) or -errno. One sendmmsg(2) per 64 datagrams instead of one sendmsg per
// datagram through Node's dgram: the engine's transmit fast path (the caller sends what was
// not taken through dgram, which queues on EAGAIN).
#define BATCH 64
static napi_value SendBatch(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4) return num(env, -EINVAL);
  int32_t fd = -1, port = 0;
  char addr[64];
  size_t alen = 0;
  uint32_t n = 0;
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok) return num(env, -EINVAL);
  if (napi_get_value_string_utf8(env, argv[1], addr, sizeof addr, &alen) != napi_ok) return num(env, -EINVAL);
  napi_get_value_int32(env, argv[2], &port);
  if (napi_get_array_length(env, argv[3], &n) != napi_ok) return num(env, -EINVAL);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) return num(env, -EINVAL);
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  uint32_t done = 0;
  while (done < n) {
    uint32_t k = n - done < BATCH ? n - done : BATCH;
    for (uint32_t i = 0; i < k; i++) {
      napi_value el;
      void *data = NULL;
      size_t len = 0;
      napi_typedarray_type type;
      napi_value ab;
      size_t off = 0;
      if (napi_get_element(env, argv[3], done + i, &el) != napi_ok ||
          napi_get_typedarray_info(env, el, &type, &len, &data, &ab, &off) != napi_ok || type != napi_uint8_array) return num(env, -EINVAL);
      iov[i].iov_base = data;
      iov[i].iov_len = len;
      memset(&msgs[i], 0, sizeof msgs[i]);
      msgs[i].msg_hdr.msg_name = &sa;
      msgs[i].msg_hdr.msg_namelen = sizeof sa;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int r = sendmmsg(fd, msgs, k, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) break;
      return num(env, done > 0 ? (double)done : (double)-errno);
    }
    done += (uint32_t)r;
    if ((uint32_t)r < k) break;
  }
  return num(env, done);
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

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor d[] = {
    { "openUdp4", NULL, OpenUdp4, NULL, NULL, NULL, napi_default, NULL },
    { "boundPort", NULL, BoundPort, NULL, NULL, NULL, napi_default, NULL },
    { "closeFd", NULL, CloseFd, NULL, NULL, NULL, napi_default, NULL },
    { "sendBatch", NULL, SendBatch, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof d / sizeof d[0], d);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
