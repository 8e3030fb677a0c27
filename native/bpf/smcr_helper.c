// SPDX-License-Identifier: MIT
/* smcr-helper: loads smcr_opt.bpf.o, attaches it to a cgroup v2 through a BPF link, moves the
 * Node process (--pid) into that cgroup, then answers lookups on stdin/stdout, one line each:
 *
 *   fd FD                          -> OK {json} | NONE | ERR text   (FD: a socket fd of --pid)
 *   tuple LADDR LPORT RADDR RPORT  -> OK {json} | NONE | ERR text
 *   stats                          -> STATS {json}
 *   quit (or EOF, SIGTERM, SIGINT, SIGHUP, parent death) -> detach, move back, rmdir, exit 0
 *
 * Start-up ends with exactly one line: READY {json}, or FATAL {"code":..,"errno":..,
 * "message":..} and exit status 2. Codes: no_permission, no_bpf, no_sockops, kernel_too_old,
 * no_object, load_failed, no_cgroup2, cgroup, conflict, attach, cgroup_move, usage.
 * The link is not pinned: when this process dies, the kernel detaches the program. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "smcr_opt.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static struct bpf_object *obj;
static struct bpf_link *link_;
static int sk_map_fd = -1, tuple_map_fd = -1, stats_fd = -1;
static int target_pid, pidfd = -1;
static char cg_mount[PATH_MAX];       /* cgroup2 mount point used */
static char cg_orig[PATH_MAX];        /* the target's cgroup (absolute path) */
static char cg_ours[PATH_MAX];        /* the cgroup we attach to */
static int cg_created, moved, mounted;
static char last_libbpf[512];
static volatile sig_atomic_t stop_flag;

static void json_str(FILE *f, const char *s)
{
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void cleanup(void);

static void fatal(const char *code, int err, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  printf("FATAL {\"code\":");
  json_str(stdout, code);
  printf(",\"errno\":%d,\"message\":", err);
  json_str(stdout, msg);
  printf("}\n");
  fflush(stdout);
  cleanup();
  exit(2);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
  char line[512];
  va_list ap2;
  va_copy(ap2, ap);
  if (getenv("SMCR_HELPER_DEBUG")) vfprintf(stderr, fmt, ap2);
  va_end(ap2);
  vsnprintf(line, sizeof(line), fmt, ap);
  if (level == LIBBPF_WARN) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    if (n) snprintf(last_libbpf, sizeof(last_libbpf), "%s", line);
  }
  return 0;
}

static int write_file(const char *path, const char *s)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = write(fd, s, strlen(s));
  int e = n < 0 ? -errno : 0;
  close(fd);
  return e;
}

/* The cgroup2 mount point from /proc/self/mountinfo (root "/" only), or "" */
static void find_cgroup2(char *out, size_t len)
{
  FILE *f = fopen("/proc/self/mountinfo", "re");
  char line[4096];
  out[0] = 0;
  if (!f) return;
  while (fgets(line, sizeof(line), f)) {
    char *sep = strstr(line, " - ");
    if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0) continue;
    char root[PATH_MAX], mnt[PATH_MAX];
    if (sscanf(line, "%*d %*d %*s %4095s %4095s", root, mnt) != 2) continue;
    if (strcmp(root, "/") != 0) continue;
    snprintf(out, len, "%s", mnt);
    break;
  }
  fclose(f);
}

/* cgroup v2 path of a process ("0::/x/y" line) */
static int proc_cgroup(int pid, char *out, size_t len)
{
  char path[64], line[PATH_MAX + 16];
  snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
  FILE *f = fopen(path, "re");
  if (!f) return -errno;
  int rc = -ENOENT;
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "0::", 3) != 0) continue;
    line[strcspn(line, "\n")] = 0;
    snprintf(out, len, "%s", line + 3);
    rc = 0;
    break;
  }
  fclose(f);
  return rc;
}

/* Move every process of cgroup `from` into `to` (best effort). */
static void move_all(const char *from, const char *to)
{
  char p[PATH_MAX + 16], q[PATH_MAX + 16], line[64];
  snprintf(p, sizeof(p), "%s/cgroup.procs", from);
  snprintf(q, sizeof(q), "%s/cgroup.procs", to);
  for (int round = 0; round < 3; round++) {
    FILE *f = fopen(p, "re");
    if (!f) return;
    int any = 0;
    while (fgets(line, sizeof(line), f)) {
      line[strcspn(line, "\n")] = 0;
      if (line[0]) { write_file(q, line); any = 1; }
    }
    fclose(f);
    if (!any) return;
  }
}

static void cleanup(void)
{
  if (link_) { bpf_link__destroy(link_); link_ = NULL; }
  if (moved && cg_orig[0]) move_all(cg_ours, cg_orig);
  moved = 0;
  if (cg_created) {
    /* EBUSY while an exiting process of ours is not reaped yet (e.g. Node was SIGKILLed and
     * its parent has not waited for it): retry for up to ~3 s. */
    for (int i = 0; i < 100 && rmdir(cg_ours) != 0 && errno == EBUSY; i++) usleep(i < 20 ? 10000 : 40000);
    cg_created = 0;
  }
  if (mounted) { umount2(cg_mount, MNT_DETACH); rmdir(cg_mount); mounted = 0; }
  if (obj) { bpf_object__close(obj); obj = NULL; }
}

static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static int parse_range(const char *s, struct smcr_port_range *r)
{
  char *end;
  long lo = strtol(s, &end, 10), hi = lo;
  if (*end == '-') hi = strtol(end + 1, &end, 10);
  if (*end || lo < 1 || hi > 65535 || lo > hi) return -1;
  r->lo = (__u16)lo;
  r->hi = (__u16)hi;
  return 0;
}

static void print_result(const struct smcr_result *r)
{
  printf("OK {\"role\":\"%s\",\"weSent\":%s,\"peerHad\":%s,\"synSmc\":%s,\"done\":%s,"
         "\"synUnknown\":%s,\"reserveFailed\":%s,\"cookie\":\"%llu\"}\n",
         r->role == SMCR_ROLE_ACTIVE ? "active" : r->role == SMCR_ROLE_PASSIVE ? "passive" : "unknown",
         r->we_sent ? "true" : "false", r->peer_had ? "true" : "false",
         r->we_sent && r->peer_had ? "true" : "false", r->done ? "true" : "false",
         r->syn_unknown ? "true" : "false", r->reserve_failed ? "true" : "false",
         (unsigned long long)r->cookie);
}

static int parse_addr(const char *s, __u32 out[4])
{
  struct in_addr a4;
  if (inet_pton(AF_INET, s, &a4) == 1) {
    out[0] = 0; out[1] = 0; out[2] = htonl(0xffff); out[3] = a4.s_addr;
    return 0;
  }
  return inet_pton(AF_INET6, s, out) == 1 ? 0 : -1;
}

static void cmd_fd(const char *arg)
{
  char *end;
  long n = strtol(arg, &end, 10);
  if (*end || n < 0 || n > INT_MAX) { printf("ERR bad fd\n"); return; }
  int fd = (int)syscall(SYS_pidfd_getfd, pidfd, (int)n, 0);
  if (fd < 0) { printf("ERR pidfd_getfd(%ld): %s\n", n, strerror(errno)); return; }
  struct smcr_result r;
  if (bpf_map_lookup_elem(sk_map_fd, &fd, &r) == 0) print_result(&r);
  else if (errno == ENOENT) printf("NONE\n");
  else printf("ERR lookup: %s\n", strerror(errno));
  close(fd);
}

static void cmd_tuple(const char *arg)
{
  char la[64], ra[64];
  unsigned lp, rp;
  struct smcr_tuple t;
  memset(&t, 0, sizeof(t));
  if (sscanf(arg, "%63s %u %63s %u", la, &lp, ra, &rp) != 4 || lp > 65535 || rp > 65535 ||
      parse_addr(la, t.laddr) || parse_addr(ra, t.raddr)) { printf("ERR bad tuple\n"); return; }
  t.lport = (__u16)lp;
  t.rport = (__u16)rp;
  struct smcr_result r;
  if (bpf_map_lookup_elem(tuple_map_fd, &t, &r) == 0) print_result(&r);
  else if (errno == ENOENT) printf("NONE\n");
  else printf("ERR lookup: %s\n", strerror(errno));
}

static void cmd_stats(void)
{
  static const char *names[SMCR_ST_MAX] = {
    "synOpt", "synAckOpt", "synAckPlain", "synAckCookie", "activePeer", "activeNoPeer",
    "passivePeer", "passiveNoPeer", "passiveUnknown", "reserveFailed", "storeFailed"};
  printf("STATS {");
  for (__u32 i = 0; i < SMCR_ST_MAX; i++) {
    __u64 v = 0;
    bpf_map_lookup_elem(stats_fd, &i, &v);
    printf("%s\"%s\":%llu", i ? "," : "", names[i], (unsigned long long)v);
  }
  printf("}\n");
}

static void usage(void)
{
  fatal("usage", EINVAL, "usage: smcr-helper --obj FILE --pid PID [--cgroup DIR] [--local-ports LO-HI]... "
        "[--remote-ports LO-HI]... [--syncookie-echo] [--synack-always] [--probe]");
}

int main(int argc, char **argv)
{
  const char *obj_path = NULL, *cgroup_arg = NULL;
  struct smcr_config cfg;
  int probe_only = 0;
  memset(&cfg, 0, sizeof(cfg));
  setvbuf(stdout, NULL, _IOLBF, 0);

  /* Signal handlers first, before anything can ask us to stop: Node reads READY and may be
   * killed at once, and a SIGTERM (parent death) that met the default action would end this
   * process without cleanup, leaving our cgroup behind. A stop during start-up is acted on
   * when the command loop begins. */
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal; /* no SA_RESTART: a signal ends the blocking read */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) stop_flag = 1; /* the parent died before the request took effect */
  libbpf_set_print(libbpf_print);

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--obj") && v) { obj_path = v; i++; }
    else if (!strcmp(a, "--pid") && v) { target_pid = atoi(v); i++; }
    else if (!strcmp(a, "--cgroup") && v) { cgroup_arg = v; i++; }
    else if (!strcmp(a, "--local-ports") && v) {
      if (cfg.n_local >= SMCR_MAX_RANGES || parse_range(v, &cfg.local[cfg.n_local])) usage();
      cfg.n_local++; i++;
    } else if (!strcmp(a, "--remote-ports") && v) {
      if (cfg.n_remote >= SMCR_MAX_RANGES || parse_range(v, &cfg.remote[cfg.n_remote])) usage();
      cfg.n_remote++; i++;
    } else if (!strcmp(a, "--syncookie-echo")) cfg.flags |= SMCR_F_SYNCOOKIE_ECHO;
    else if (!strcmp(a, "--synack-always")) cfg.flags |= SMCR_F_SYNACK_ALWAYS;
    else if (!strcmp(a, "--probe")) probe_only = 1;
    else usage();
  }
  if (!obj_path || (!probe_only && target_pid <= 0)) usage();

  /* 1. What the kernel and our privileges allow. */
  /* A trivial sock_ops program tells missing privilege (EPERM/EACCES) from a kernel without
   * sock_ops (EINVAL) or without bpf() (ENOSYS). */
  struct bpf_insn ret1[] = {
    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
    {.code = BPF_JMP | BPF_EXIT},
  };
  int r = bpf_prog_load(BPF_PROG_TYPE_SOCK_OPS, "smcr_probe", "MIT", ret1, 2, NULL);
  if (r >= 0) close(r);
  else {
    int e = errno;
    if (e == EPERM || e == EACCES)
      fatal("no_permission", e, "loading a BPF sock_ops program was refused (%s): needs root or CAP_BPF + CAP_NET_ADMIN", strerror(e));
    if (e == ENOSYS) fatal("no_bpf", e, "the kernel has no bpf() system call (CONFIG_BPF_SYSCALL)");
    if (e == EINVAL) fatal("no_sockops", e, "the kernel does not support BPF sock_ops programs (CONFIG_CGROUP_BPF)");
    fatal("no_bpf", e, "loading a trivial BPF sock_ops program failed: %s", strerror(e));
  }
  r = libbpf_probe_bpf_helper(BPF_PROG_TYPE_SOCK_OPS, BPF_FUNC_reserve_hdr_opt, NULL);
  if (r == 0) fatal("kernel_too_old", EOPNOTSUPP, "the kernel lacks the BPF TCP header-option API (bpf_reserve_hdr_opt, Linux >= 5.10)");
  if (r < 0) fatal("no_bpf", -r, "probing bpf_reserve_hdr_opt failed: %s", strerror(-r));

  /* 2. Load the object. */
  if (access(obj_path, R_OK) != 0) fatal("no_object", errno, "BPF object %s: %s (build it with `bash native/bpf/build.sh`)", obj_path, strerror(errno));
  obj = bpf_object__open_file(obj_path, NULL);
  if (!obj) { int e = errno; obj = NULL; fatal("load_failed", e, "opening %s: %s", obj_path, strerror(e)); }
  r = bpf_object__load(obj);
  if (r) {
    if (r == -EPERM) fatal("no_permission", EPERM, "loading the BPF object was refused (EPERM): needs root or CAP_BPF + CAP_NET_ADMIN");
    fatal("load_failed", -r, "loading %s failed: %s%s%s", obj_path, strerror(-r), last_libbpf[0] ? "; libbpf: " : "", last_libbpf);
  }
  int cfg_fd = bpf_object__find_map_fd_by_name(obj, "smcr_config_map");
  sk_map_fd = bpf_object__find_map_fd_by_name(obj, "smcr_sk_map");
  tuple_map_fd = bpf_object__find_map_fd_by_name(obj, "smcr_tuple_map");
  stats_fd = bpf_object__find_map_fd_by_name(obj, "smcr_stats");
  struct bpf_program *prog = bpf_object__find_program_by_name(obj, "smcr_sockops");
  if (cfg_fd < 0 || sk_map_fd < 0 || tuple_map_fd < 0 || stats_fd < 0 || !prog)
    fatal("load_failed", ENOENT, "%s is not the smcscope sock_ops object (maps or program missing)", obj_path);
  __u32 zero = 0;
  if (bpf_map_update_elem(cfg_fd, &zero, &cfg, BPF_ANY)) fatal("load_failed", errno, "writing the config map: %s", strerror(errno));
  if (probe_only) {
    printf("READY {\"probe\":true}\n");
    cleanup();
    return 0;
  }

  pidfd = (int)syscall(SYS_pidfd_open, target_pid, 0);
  if (pidfd < 0) fatal("usage", errno, "pidfd_open(%d): %s", target_pid, strerror(errno));

  /* 3. The cgroup. */
  int cg_fd;
  if (cgroup_arg) {
    snprintf(cg_ours, sizeof(cg_ours), "%s", cgroup_arg);
  } else {
    find_cgroup2(cg_mount, sizeof(cg_mount));
    if (!cg_mount[0]) {
      /* Not mounted (e.g. under `ip netns exec`, which remounts /sys): mount it privately,
       * in a mount namespace of our own, so nothing leaks into the host's mounts. */
      if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        fatal("no_cgroup2", errno, "no cgroup2 hierarchy is mounted and a private mount namespace cannot be made: %s", strerror(errno));
      snprintf(cg_mount, sizeof(cg_mount), "/tmp/smcr-cg2-XXXXXX");
      if (!mkdtemp(cg_mount) || mount("cgroup2", cg_mount, "cgroup2", 0, NULL) != 0)
        fatal("no_cgroup2", errno, "no cgroup2 hierarchy is mounted and mounting one failed: %s", strerror(errno));
      mounted = 1;
    }
    char rel[PATH_MAX];
    r = proc_cgroup(target_pid, rel, sizeof(rel));
    if (r) fatal("no_cgroup2", -r, "process %d has no cgroup v2 membership (/proc/%d/cgroup): %s", target_pid, target_pid, strerror(-r));
    if (strcmp(rel, "/") == 0) rel[0] = 0;
    snprintf(cg_orig, sizeof(cg_orig), "%s%s", cg_mount, rel);
    int n = snprintf(cg_ours, sizeof(cg_ours), "%s/smcscope-%d", cg_orig, target_pid);
    if (n >= (int)sizeof(cg_ours)) fatal("cgroup", ENAMETOOLONG, "cgroup path too long");
    if (mkdir(cg_ours, 0755) != 0 && errno != EEXIST)
      fatal("cgroup", errno, "cannot create cgroup %s: %s", cg_ours, strerror(errno));
    cg_created = 1;
  }
  cg_fd = open(cg_ours, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg_fd < 0) fatal("cgroup", errno, "cannot open cgroup %s: %s", cg_ours, strerror(errno));

  /* 4. Attach (BPF link: multi-attach, detached when this process exits). */
  link_ = bpf_program__attach_cgroup(prog, cg_fd);
  if (!link_) {
    int e = errno;
    link_ = NULL;
    close(cg_fd);
    if (e == EPERM)
      fatal("conflict", e, "attaching to cgroup %s was refused (EPERM): another sock_ops program is attached there or on an ancestor without BPF_F_ALLOW_MULTI (see `bpftool cgroup tree`)", cg_ours);
    fatal("attach", e, "attaching to cgroup %s failed: %s", cg_ours, strerror(e));
  }
  close(cg_fd);

  /* 5. Move the Node process in: sockets it creates from now on are in scope. */
  if (cg_created) {
    char procs[PATH_MAX + 16], pid_s[16];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_ours);
    snprintf(pid_s, sizeof(pid_s), "%d", target_pid);
    r = write_file(procs, pid_s);
    if (r) fatal("cgroup_move", -r, "cannot move process %d into %s: %s", target_pid, cg_ours, strerror(-r));
    moved = 1;
  }

  struct bpf_prog_info pinfo;
  __u32 plen = sizeof(pinfo);
  memset(&pinfo, 0, sizeof(pinfo));
  bpf_obj_get_info_by_fd(bpf_program__fd(prog), &pinfo, &plen);
  printf("READY {\"cgroup\":");
  json_str(stdout, cg_ours);
  printf(",\"created\":%s,\"mountedCgroup2\":%s,\"progId\":%u}\n", cg_created ? "true" : "false",
         mounted ? "true" : "false", pinfo.id);

  char line[512];
  while (!stop_flag && fgets(line, sizeof(line), stdin)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!strncmp(line, "fd ", 3)) cmd_fd(line + 3);
    else if (!strncmp(line, "tuple ", 6)) cmd_tuple(line + 6);
    else if (!strcmp(line, "stats")) cmd_stats();
    else if (!strcmp(line, "quit")) break;
    else printf("ERR unknown command\n");
    fflush(stdout);
  }
  cleanup();
  return 0;
}
