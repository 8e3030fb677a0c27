/* Shared between the sock_ops program (smcr_opt.bpf.c) and its loader (smcr_helper.c).
 * Plain fixed-size types only: the same layout on the BPF side and in userspace. */
#ifndef SMCR_OPT_H
#define SMCR_OPT_H

#include <linux/types.h>

#define SMCR_MAX_RANGES 8

/* smcr_config.flags */
#define SMCR_F_SYNCOOKIE_ECHO 0x1 /* echo on syncookie SYN-ACKs too (pending map carries it) */
#define SMCR_F_SYNACK_ALWAYS  0x2 /* tests only: echo even when the client's SYN lacked it */

struct smcr_port_range { __u16 lo, hi; };

struct smcr_config {
  __u32 flags;
  __u32 n_local;   /* listeners: local port must be in one of these ranges (0 = any) */
  __u32 n_remote;  /* connect(): remote port must be in one of these ranges (0 = any) */
  __u32 pad;
  struct smcr_port_range local[SMCR_MAX_RANGES];
  struct smcr_port_range remote[SMCR_MAX_RANGES];
};

#define SMCR_ROLE_ACTIVE  1
#define SMCR_ROLE_PASSIVE 2

/* One result per socket. syn_smc (the kernel's tp->syn_smc) = we_sent && peer_had. */
struct smcr_result {
  __u8 role;          /* SMCR_ROLE_* */
  __u8 we_sent;       /* our SYN (active) / SYN-ACK (passive) carried the option */
  __u8 peer_had;      /* the peer's SYN-ACK (active) / SYN (passive) carried it */
  __u8 done;          /* handshake finished, the result is final */
  __u8 syn_unknown;   /* passive: the client's SYN was not saved (syncookies, old listener) */
  __u8 reserve_failed;/* no room for the option in the header */
  __u16 pad;
  __u64 cookie;       /* socket cookie (bpf_get_socket_cookie) */
};

/* Normalised 4-tuple: IPv4 addresses as IPv4-mapped IPv6 (::ffff:a.b.c.d), ports host order. */
struct smcr_tuple {
  __u32 laddr[4];
  __u32 raddr[4];
  __u16 lport;
  __u16 rport;
};

enum smcr_stat {
  SMCR_ST_SYN_OPT = 0,       /* option written on one of our SYNs (incl. retransmits) */
  SMCR_ST_SYNACK_OPT,        /* option echoed on one of our SYN-ACKs (incl. retransmits) */
  SMCR_ST_SYNACK_PLAIN,      /* SYN-ACK of ours without it: the client's SYN lacked it */
  SMCR_ST_SYNACK_COOKIE,     /* syncookie SYN-ACKs seen */
  SMCR_ST_ACTIVE_PEER,       /* active: SYN-ACK had it */
  SMCR_ST_ACTIVE_NOPEER,     /* active: SYN-ACK lacked it */
  SMCR_ST_PASSIVE_PEER,      /* passive: SYN had it */
  SMCR_ST_PASSIVE_NOPEER,    /* passive: SYN lacked it */
  SMCR_ST_PASSIVE_UNKNOWN,   /* passive: SYN not saved */
  SMCR_ST_RESERVE_FAILED,    /* bpf_reserve_hdr_opt failed (no option space) */
  SMCR_ST_STORE_FAILED,      /* bpf_store_hdr_opt failed */
  SMCR_ST_MAX
};

#endif
