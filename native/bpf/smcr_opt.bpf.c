// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* smcscope: TCP option 254 (SMC-R, FE 06 E2 D4 C3 D9) on the SYN / SYN-ACK of the sockets of
 * one cgroup, with the TCP header-option API of BPF sock_ops (Linux >= 5.10).
 *
 * Active side (connect): write the option on our SYN; on ACTIVE_ESTABLISHED read the SYN-ACK
 * for it. Passive side (listen): TCP_SAVE_SYN on the listener so SYN-ACK *retransmits* can
 * still read the client's SYN; echo the option only when the client's SYN had it (the kernel's
 * ireq->smc_ok); on PASSIVE_ESTABLISHED read the saved SYN. The result per socket
 * (sk_storage, looked up by fd, and an LRU tuple map) carries we_sent / peer_had: syn_smc is
 * both. Only the UAPI struct bpf_sock_ops is read: no CO-RE, no vmlinux BTF needed.
 * Facts and the test matrix: docs/native.md. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "smcr_opt.h"

#define AF_INET 2
#define AF_INET6 10
#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10
#define ENOENT 2
#define ENOSPC 28
#define EEXIST 17
#define ENOMSG 42

/* A context load that clang may not move or merge (the verifier rejects ctx + offset kept in a
 * register across branches). */
#define CTX(x) (*(volatile typeof(x) *)&(x))

#define SMCR_EXID_B0 0xe2
#define SMCR_EXID_B1 0xd4
#define SMCR_EXID_B2 0xc3
#define SMCR_EXID_B3 0xd9

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct smcr_config);
} smcr_config_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct smcr_result);
} smcr_sk_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct smcr_tuple);
  __type(value, struct smcr_result);
} smcr_tuple_map SEC(".maps");

/* Passive side: "our SYN-ACK carried the option" from the request sock to the child. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, struct smcr_tuple);
  __type(value, __u8);
} smcr_pending_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, SMCR_ST_MAX);
  __type(key, __u32);
  __type(value, __u64);
} smcr_stats SEC(".maps");

static __always_inline void count(__u32 which)
{
  __u64 *v = bpf_map_lookup_elem(&smcr_stats, &which);
  if (v) __sync_fetch_and_add(v, 1);
}

static __always_inline struct smcr_config *config(void)
{
  __u32 zero = 0;
  return bpf_map_lookup_elem(&smcr_config_map, &zero);
}

static __always_inline int in_ranges(const struct smcr_port_range *r, __u32 n, __u32 port)
{
  if (n == 0) return 1;
#pragma unroll
  for (int i = 0; i < SMCR_MAX_RANGES; i++) {
    if ((__u32)i < n && port >= r[i].lo && port <= r[i].hi) return 1;
  }
  return 0;
}

/* The option as it goes on the wire, and as bpf_load_hdr_opt() searches for it: kind 254,
 * kind-length 6 (= a 4-byte magic), magic = the ExID. */
static __always_inline void smcr_opt(__u8 o[6])
{
  o[0] = 254; o[1] = 6;
  o[2] = SMCR_EXID_B0; o[3] = SMCR_EXID_B1; o[4] = SMCR_EXID_B2; o[5] = SMCR_EXID_B3;
}

/* 1 when the packet (flags 0) or the client's SYN (BPF_LOAD_HDR_OPT_TCP_SYN) has the option,
 * 0 when it has not, -ENOENT when no SYN is available (not saved). */
static __always_inline int has_opt(struct bpf_sock_ops *skops, __u64 flags)
{
  __u8 o[6];
  smcr_opt(o);
  long r = bpf_load_hdr_opt(skops, o, sizeof(o), flags);
  if (r > 0) return 1;
  if (r == -ENOENT) return -ENOENT;
  return 0; /* -ENOMSG: not there; -ENOSPC: a longer 254 option with our ExID is not ours */
}

static __always_inline void v4mapped(__u32 a[4], __u32 ip4)
{
  a[0] = 0; a[1] = 0; a[2] = bpf_htonl(0x0000ffff); a[3] = ip4;
}

/* Tuple of a full socket (or request sock of a single-family listener). */
static __always_inline void tuple_from_sk(struct bpf_sock_ops *skops, struct smcr_tuple *t)
{
  /* Every context field is read once, unconditionally: the verifier rejects the
   * pointer arithmetic clang emits when it merges ctx loads of two branches. */
  __u32 fam = CTX(skops->family);
  __u32 l4 = CTX(skops->local_ip4), r4 = CTX(skops->remote_ip4);
  __u32 l6a = CTX(skops->local_ip6[0]), l6b = CTX(skops->local_ip6[1]), l6c = CTX(skops->local_ip6[2]), l6d = CTX(skops->local_ip6[3]);
  __u32 r6a = CTX(skops->remote_ip6[0]), r6b = CTX(skops->remote_ip6[1]), r6c = CTX(skops->remote_ip6[2]), r6d = CTX(skops->remote_ip6[3]);
  __u32 lp = CTX(skops->local_port), rp = CTX(skops->remote_port);
  if (fam == AF_INET) {
    v4mapped(t->laddr, l4);
    v4mapped(t->raddr, r4);
  } else {
    t->laddr[0] = l6a; t->laddr[1] = l6b; t->laddr[2] = l6c; t->laddr[3] = l6d;
    t->raddr[0] = r6a; t->raddr[1] = r6b; t->raddr[2] = r6c; t->raddr[3] = r6d;
  }
  t->lport = (__u16)lp;
  t->rport = (__u16)bpf_ntohl(rp);
}

/* Tuple of a request sock, from the client's SYN itself: a request sock made by an IPv4 SYN
 * on a dual-stack (::) listener reports AF_INET6 while only its IPv4 fields are valid. */
static __always_inline int tuple_from_syn(struct bpf_sock_ops *skops, struct smcr_tuple *t)
{
  __u8 b[64];
  long r = bpf_getsockopt(skops, SOL_TCP, TCP_BPF_SYN_IP, b, sizeof(b));
  if (r <= 0 && r != -ENOSPC) return -1;
  __u8 ver = b[0] >> 4;
  if (ver == 4) {
    if ((b[0] & 0x0f) != 5) return -1; /* IP options on a SYN: not handled */
    __u32 s, d;
    __builtin_memcpy(&s, &b[12], 4);
    __builtin_memcpy(&d, &b[16], 4);
    v4mapped(t->raddr, s);
    v4mapped(t->laddr, d);
    t->rport = ((__u16)b[20] << 8) | b[21];
    t->lport = ((__u16)b[22] << 8) | b[23];
    return 0;
  }
  if (ver == 6) {
    if (b[6] != 6) return -1; /* extension headers before TCP: not handled */
    __builtin_memcpy(t->raddr, &b[8], 16);
    __builtin_memcpy(t->laddr, &b[24], 16);
    t->rport = ((__u16)b[40] << 8) | b[41];
    t->lport = ((__u16)b[42] << 8) | b[43];
    return 0;
  }
  return -1;
}

/* Passive side: does this SYN-ACK carry the option? Same answer in HDR_OPT_LEN and WRITE. */
static __always_inline int synack_wants_opt(struct bpf_sock_ops *skops, struct smcr_config *c)
{
  if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE && !(c->flags & SMCR_F_SYNCOOKIE_ECHO))
    return 0; /* default: no echo under syncookies, both sides fall back cleanly */
  if (c->flags & SMCR_F_SYNACK_ALWAYS) return 1;
  return has_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN) == 1;
}

static __always_inline void clear_write_flag(struct bpf_sock_ops *skops)
{
  bpf_sock_ops_cb_flags_set(skops, (skops->bpf_sock_ops_cb_flags & ~BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG) |
                                   BPF_SOCK_OPS_STATE_CB_FLAG);
}

static __always_inline void publish(struct bpf_sock_ops *skops, struct smcr_result *res)
{
  struct smcr_tuple t = {};
  tuple_from_sk(skops, &t);
  bpf_map_update_elem(&smcr_tuple_map, &t, res, BPF_ANY);
}

SEC("sockops")
int smcr_sockops(struct bpf_sock_ops *skops)
{
  struct smcr_config *c = config();
  struct bpf_sock *sk;
  struct smcr_result *res;
  __u8 o[6];
  long r;

  if (!c) return 1;

  switch (skops->op) {
  case BPF_SOCK_OPS_TCP_CONNECT_CB:
    if (!in_ranges(c->remote, c->n_remote, bpf_ntohl(skops->remote_port) & 0xffff)) return 1;
    sk = skops->sk;
    if (!sk) return 1;
    res = bpf_sk_storage_get(&smcr_sk_map, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
    if (!res) return 1;
    res->role = SMCR_ROLE_ACTIVE;
    res->we_sent = 0; res->peer_had = 0; res->done = 0; res->syn_unknown = 0; res->reserve_failed = 0;
    bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
    return 1;

  case BPF_SOCK_OPS_TCP_LISTEN_CB: {
    if (!in_ranges(c->local, c->n_local, skops->local_port)) return 1;
    int one = 1;
    bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof(one));
    bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
    return 1;
  }

  case BPF_SOCK_OPS_HDR_OPT_LEN_CB: {
    __u32 f = skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK);
    if (f == TCPHDR_SYN) {
      r = bpf_reserve_hdr_opt(skops, 6, 0);
      if (r != 0) {
        count(SMCR_ST_RESERVE_FAILED);
        sk = skops->sk;
        if (sk && (res = bpf_sk_storage_get(&smcr_sk_map, sk, 0, 0))) res->reserve_failed = 1;
      }
    } else if (f == (TCPHDR_SYN | TCPHDR_ACK)) {
      if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE) count(SMCR_ST_SYNACK_COOKIE);
      if (!synack_wants_opt(skops, c)) { count(SMCR_ST_SYNACK_PLAIN); return 1; }
      if (bpf_reserve_hdr_opt(skops, 6, 0) != 0) count(SMCR_ST_RESERVE_FAILED);
    }
    return 1;
  }

  case BPF_SOCK_OPS_WRITE_HDR_OPT_CB: {
    __u32 f = skops->skb_tcp_flags & (TCPHDR_SYN | TCPHDR_ACK);
    if (f == TCPHDR_SYN) {
      smcr_opt(o);
      r = bpf_store_hdr_opt(skops, o, sizeof(o), 0);
      if (r != 0 && r != -EEXIST) { count(SMCR_ST_STORE_FAILED); return 1; }
      count(SMCR_ST_SYN_OPT);
      sk = skops->sk;
      if (sk && (res = bpf_sk_storage_get(&smcr_sk_map, sk, 0, 0))) res->we_sent = 1;
    } else if (f == (TCPHDR_SYN | TCPHDR_ACK)) {
      if (!synack_wants_opt(skops, c)) return 1;
      smcr_opt(o);
      r = bpf_store_hdr_opt(skops, o, sizeof(o), 0);
      if (r != 0 && r != -EEXIST) { count(SMCR_ST_STORE_FAILED); return 1; }
      count(SMCR_ST_SYNACK_OPT);
      struct smcr_tuple t = {};
      if (tuple_from_syn(skops, &t) == 0) {
        __u8 one = 1;
        bpf_map_update_elem(&smcr_pending_map, &t, &one, BPF_ANY);
      }
    }
    return 1;
  }

  case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
    sk = skops->sk;
    if (!sk) return 1;
    res = bpf_sk_storage_get(&smcr_sk_map, sk, 0, 0);
    if (!res || res->role != SMCR_ROLE_ACTIVE) return 1;
    /* skb_data is the SYN-ACK that concludes the handshake */
    res->peer_had = has_opt(skops, 0) == 1;
    res->done = 1;
    res->cookie = bpf_get_socket_cookie(skops);
    count(res->peer_had ? SMCR_ST_ACTIVE_PEER : SMCR_ST_ACTIVE_NOPEER);
    publish(skops, res);
    clear_write_flag(skops);
    return 1;

  case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB: {
    /* The child inherited the listener's flags: only listeners of ours (in range, created
     * after the attach) set the WRITE flag in LISTEN_CB. */
    if (!(skops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG)) return 1;
    sk = skops->sk;
    if (!sk) return 1;
    res = bpf_sk_storage_get(&smcr_sk_map, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
    if (!res) return 1;
    struct smcr_tuple t = {};
    tuple_from_sk(skops, &t);
    __u8 *pend = bpf_map_lookup_elem(&smcr_pending_map, &t);
    int syn = has_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN); /* the child's saved SYN */
    res->role = SMCR_ROLE_PASSIVE;
    res->we_sent = pend ? 1 : 0;
    if (syn == -ENOENT) {
      /* syncookies: no SYN was kept; with the echo policy the pending entry says the SYN
       * had it (we echo only then) */
      res->syn_unknown = 1;
      res->peer_had = pend ? 1 : 0;
      count(SMCR_ST_PASSIVE_UNKNOWN);
    } else {
      res->syn_unknown = 0;
      res->peer_had = syn == 1;
      count(res->peer_had ? SMCR_ST_PASSIVE_PEER : SMCR_ST_PASSIVE_NOPEER);
    }
    if (pend) bpf_map_delete_elem(&smcr_pending_map, &t);
    res->done = 1;
    res->reserve_failed = 0;
    res->cookie = bpf_get_socket_cookie(skops);
    bpf_map_update_elem(&smcr_tuple_map, &t, res, BPF_ANY);
    clear_write_flag(skops);
    return 1;
  }

  case BPF_SOCK_OPS_STATE_CB:
    if (skops->args[1] == BPF_TCP_CLOSE) {
      struct smcr_tuple t = {};
      tuple_from_sk(skops, &t);
      bpf_map_delete_elem(&smcr_tuple_map, &t);
    }
    return 1;
  }
  return 1;
}
