#!/usr/bin/env bash
# Builds the TCP option 254 sock_ops program and its loader from source:
#   native/bpf/build/smcr_opt.bpf.o   (clang -target bpf, BTF included; no CO-RE relocations)
#   native/bpf/build/smcr-helper      (cc + libbpf)
# Needs (Debian): clang, libbpf-dev, gcc, make-free. Usage: bash native/bpf/build.sh
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p build
CLANG=${CLANG:-clang}
CC=${CC:-cc}
for tool in "$CLANG" "$CC"; do
  command -v "$tool" >/dev/null || { echo "native/bpf/build.sh: $tool not found (apt-get install clang gcc libbpf-dev)" >&2; exit 1; }
done
[ -f /usr/include/bpf/libbpf.h ] || { echo "native/bpf/build.sh: libbpf headers missing (apt-get install libbpf-dev)" >&2; exit 1; }
multiarch=$("$CC" -print-multiarch 2>/dev/null || true)
# -target bpf = the host's byte order (bpfel on x86_64/arm64, bpfeb on s390x).
"$CLANG" -O2 -g -target bpf -Wall ${multiarch:+-I/usr/include/$multiarch} \
  -c smcr_opt.bpf.c -o build/smcr_opt.bpf.o.tmp
mv build/smcr_opt.bpf.o.tmp build/smcr_opt.bpf.o
"$CC" -O2 -g -Wall -Wextra -Wno-format-truncation -o build/smcr-helper.tmp smcr_helper.c -lbpf
mv build/smcr-helper.tmp build/smcr-helper
echo "native/bpf: built build/smcr_opt.bpf.o and build/smcr-helper"
