#!/usr/bin/env bash
# Build the lab guest's root file system from Debian packages (the slow, cached part).
#
#   build-rootfs.sh DEST            debootstrap bookworm (minbase) into DEST/root, install
#                                   guest/packages.txt and the bookworm-backports kernel
#   build-rootfs.sh --mirror        print the Debian mirror this machine's apt uses, or fail
#
# Called by build-image.sh, which owns the cache (DEST is a temporary folder it renames
# when this script succeeds). Needs root and debootstrap. Every mount this script makes
# lives in a private mount namespace (unshare -m), so nothing stays mounted if it fails or
# is interrupted, even by SIGKILL.
#
# The apt mirror is read from this machine's own apt configuration (deb822 *.sources or
# sources.list): never written anywhere in the project. MIRROR= / SECURITY_MIRROR= override.
set -euo pipefail
LAB="$(cd "$(dirname "$0")/.." && pwd)"
SUITE=bookworm

# URIs of the first apt source whose suites include $1 (deb822 first, then one-line format).
apt_uri_for_suite() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v s="$1" '
            /^[ \t]*$/ { u = ""; next }                         # a blank line ends a stanza
            /^URIs:/   { u = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) hit = 1 }
            hit && u   { print u; exit }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI SUITE COMPONENTS...
        sed -E 's/\[[^]]*\]//' "$f" | awk -v s="$1" '$1 == "deb" && $3 == s { print $2; exit }'
    done
}
MIRROR=${MIRROR:-$(apt_uri_for_suite "$SUITE" | head -n1)}
SECURITY_MIRROR=${SECURITY_MIRROR:-$(apt_uri_for_suite "$SUITE-security" | head -n1)}
if [ "${1:-}" = --mirror ]; then
    [ -n "$MIRROR" ] || { echo "no apt source for Debian $SUITE in /etc/apt (set MIRROR=)" >&2; exit 1; }
    echo "$MIRROR"; exit 0
fi
DEST=${1:?usage: build-rootfs.sh DEST | --mirror}
[ -n "$MIRROR" ] || { echo "build-rootfs: no apt source for Debian $SUITE in /etc/apt (set MIRROR=)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "build-rootfs: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "build-rootfs: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

R="$DEST/root"
mkdir -p "$DEST"
mapfile -t PKGS < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$LAB/guest/packages.txt" | grep -v '^$')
step() { echo "[build-rootfs] $*"; }
t0=$SECONDS

step "debootstrap $SUITE (minbase) -> $R   (log: $DEST/debootstrap.log)"
unshare --mount --propagation private \
    debootstrap --variant=minbase "$SUITE" "$R" "$MIRROR" >"$DEST/debootstrap.log" 2>&1 \
    || { tail -30 "$DEST/debootstrap.log" >&2; exit 1; }
step "debootstrap took $((SECONDS - t0))s"

cat >"$R/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $MIRROR $SUITE-backports main
${SECURITY_MIRROR:+deb $SECURITY_MIRROR $SUITE-security main}
EOF
# The guest boots with init=/usr/local/sbin/lab-init: no init system, no services.
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"; chmod 0755 "$R/usr/sbin/policy-rc.d"
# The initramfs must find the virtio disk (a chroot cannot use MODULES=dep).
mkdir -p "$R/etc/initramfs-tools"
printf 'virtio_pci\nvirtio_blk\nvirtio_net\next4\n' >"$R/etc/initramfs-tools/modules"
echo smclab >"$R/etc/hostname"
printf '127.0.0.1 localhost\n10.55.0.1 guesta\n10.55.0.2 guestb\n10.55.0.254 labhost\n' >"$R/etc/hosts"

# Run a command in the chroot with /proc, /sys, /dev bound (private mount namespace).
in_chroot() {
    unshare --mount --propagation private /bin/sh -c '
        set -e; R=$1; shift
        mount --bind /proc "$R/proc"; mount --bind /sys "$R/sys"; mount --bind /dev "$R/dev"
        exec chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C "$@"' \
        in_chroot "$R" "$@"
}
t1=$SECONDS
step "apt-get install ${#PKGS[@]} guest packages   (log: $DEST/apt.log)"
in_chroot /bin/sh -c "apt-get update && apt-get install -y --no-install-recommends ${PKGS[*]}" \
    >"$DEST/apt.log" 2>&1 || { tail -30 "$DEST/apt.log" >&2; exit 1; }
step "took $((SECONDS - t1))s"

t1=$SECONDS
step "apt-get install -t $SUITE-backports linux-image-amd64   (log: $DEST/apt-kernel.log)"
in_chroot apt-get install -y --no-install-recommends -t "$SUITE-backports" linux-image-amd64 \
    >"$DEST/apt-kernel.log" 2>&1 || { tail -30 "$DEST/apt-kernel.log" >&2; exit 1; }
in_chroot apt-get clean
# The guest has no network beyond the lab: no package lists, and no mirror name left behind.
rm -rf "$R"/var/lib/apt/lists/*
echo '# the lab guest has no apt sources (built by test/lab/scripts/build-rootfs.sh)' >"$R/etc/apt/sources.list"
step "took $((SECONDS - t1))s"

KVER=$(ls "$R/lib/modules" | sort -V | tail -n1)
case $KVER in 6.12.*) ;; *) echo "build-rootfs: expected a 6.12 kernel, got '$KVER'" >&2; exit 1 ;; esac
{
    echo "kernel $KVER"
    chroot "$R" dpkg-query -W -f='${Package} ${Version}\n' "linux-image-$KVER" rdma-core ibverbs-providers \
        ibverbs-utils perftest iperf3 iproute2 tcpdump python3 gcc
} >"$DEST/versions.txt"
cat "$DEST/versions.txt"
rm -f "$DEST"/*.log   # (they name the mirror; on failure they stay in the temporary folder's tail above)
step "root file system done in $((SECONDS - t0))s"
