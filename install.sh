#!/usr/bin/env bash
# Install everything smcscope needs on Debian (run as root), then decode a bundled real capture.
#   bash install.sh            install + show pcaps/a-first-contact.pcap
#   bash install.sh --no-demo  install only (CI)
set -euo pipefail
cd "$(dirname "$0")"

node_ok() { command -v node >/dev/null && node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)'; }

# Debian packages: tshark and tcpdump are the references the tests and `npm run bench` compare with.
pkgs=()
command -v tshark  >/dev/null || pkgs+=(tshark)
command -v tcpdump >/dev/null || pkgs+=(tcpdump)
[ -x /usr/bin/time ] || pkgs+=(time)   # npm run bench: peak RSS of each command
# Native addons (native/binding.gyp, built by `npm ci` through node-gyp): libpcap headers, C++ toolchain.
dpkg -s libpcap-dev >/dev/null 2>&1 || pkgs+=(libpcap-dev)
for c in g++ make python3; do command -v $c >/dev/null || pkgs+=($c); done
# native/verbs (libibverbs headers; the library is dlopen'ed at run time) and native/bpf (TCP
# option 254: clang builds the BPF object, libbpf its loader); bpftool and nft for their tests.
dpkg -s libibverbs-dev >/dev/null 2>&1 || pkgs+=(libibverbs-dev)
dpkg -s libbpf-dev >/dev/null 2>&1 || pkgs+=(libbpf-dev)
command -v clang >/dev/null || pkgs+=(clang)
[ -x /usr/sbin/bpftool ] || pkgs+=(bpftool)
[ -x /usr/sbin/nft ] || pkgs+=(nftables)
# The kernel interop lab (test/lab, docs/lab.md: qemu guests, runs as root): qemu, debootstrap.
if [ "$(id -u)" -eq 0 ]; then
  command -v qemu-system-x86_64 >/dev/null || pkgs+=(qemu-system-x86)
  command -v debootstrap >/dev/null || pkgs+=(debootstrap)
  command -v ip >/dev/null || pkgs+=(iproute2)
  command -v mkfs.ext4 >/dev/null || pkgs+=(e2fsprogs)
fi
# smcdump --report is tested in a real browser: Debian's chromium, headless (puppeteer-core drives
# it and never downloads a browser of its own).
[ -x /usr/bin/chromium ] || pkgs+=(chromium)
# `man smcdump` and Tab completion: man-db reads the pages, bash-completion loads the
# completion files installed below (minimal Debian images have neither).
command -v man >/dev/null || pkgs+=(man-db)
dpkg -s bash-completion >/dev/null 2>&1 || pkgs+=(bash-completion)
node_ok || pkgs+=(nodejs npm)
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then echo "install.sh: need root to apt-get install ${pkgs[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
node_ok || { echo "install.sh: smcscope needs Node.js >= 20.19 (found $(node --version 2>/dev/null || echo none))" >&2; exit 1; }

export npm_config_nodedir=/usr   # native builds use the system Node headers, never a download
export PUPPETEER_SKIP_DOWNLOAD=1  # puppeteer-core downloads nothing; belt and braces
npm ci --no-fund --no-audit --loglevel=error   # also builds dist/ (npm "prepare"), man pages and completions in dist/share

# As root: the commands on PATH, their man pages and completions system-wide, in the
# /usr/local places that man (manpath.config), bash-completion (XDG_DATA_DIRS) and zsh (fpath)
# search on Debian. The pages and completions are generated from each command's --help.
if [ "$(id -u)" -eq 0 ]; then
  for b in smcdump smcping smcperf; do ln -sfn "$PWD/dist/cli/bin/$b.js" "/usr/local/bin/$b"; done
  install -d /usr/local/share/man/man1 /usr/local/share/bash-completion/completions /usr/local/share/zsh/site-functions
  install -m 644 dist/share/man/man1/*.1 /usr/local/share/man/man1/
  install -m 644 dist/share/bash-completion/completions/* /usr/local/share/bash-completion/completions/
  install -m 644 dist/share/zsh/site-functions/_* /usr/local/share/zsh/site-functions/
  mandb -q 2>/dev/null || true   # for whatis/apropos; man finds the pages without it
fi

if [ "${1:-}" != "--no-demo" ]; then
  echo "--- npx smcdump -r pcaps/a-first-contact.pcap"
  npx smcdump -r pcaps/a-first-contact.pcap
fi
