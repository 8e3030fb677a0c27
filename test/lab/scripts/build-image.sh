#!/usr/bin/env bash
# The lab guest image, cached outside the repository and keyed by its inputs.
#
#   build-image.sh            build what is missing, print the image folder (last line)
#   build-image.sh --check    print the image folder if it is built, else exit 1 (no build)
#   build-image.sh --cache    print the cache folder
#
# Cache folder: $SMCSCOPE_LAB_CACHE, else /var/cache/smcscope-lab as root, else
# ${XDG_CACHE_HOME:-~/.cache}/smcscope-lab. Two levels, each keyed by a hash of its inputs:
#   rootfs-KEY/   Debian root file system (build-rootfs.sh + guest/packages.txt), ~3-5 min
#   image-KEY/    rootfs.img (ext4, booted read-only with snapshot=on by every guest), vmlinuz,
#                 initrd.img, versions.txt; adds the lab's guest programs (guest/*), seconds
# A changed input gives a new key, so it is rebuilt; the two newest entries of each level
# are kept. Scenario scripts and guest/common.sh are not in the image (the guests read them over 9p).
set -euo pipefail
LAB="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${SMCSCOPE_LAB_CACHE:-}" ]; then CACHE=$SMCSCOPE_LAB_CACHE
elif [ "$(id -u)" = 0 ]; then CACHE=/var/cache/smcscope-lab
else CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/smcscope-lab; fi

hash_files() { (cd "$LAB" && sha256sum "$@" | sha256sum | cut -c1-16); }
ROOTFS_KEY=$(hash_files scripts/build-rootfs.sh guest/packages.txt)
GUEST_FILES=(guest/lab-init guest/smcdiag.py guest/smc_run guest/smcpingpong.c
             guest/smcxfer.c guest/smcpreload.c guest/labpoweroff.c)
IMAGE_KEY=$(echo "$ROOTFS_KEY $(hash_files scripts/build-image.sh "${GUEST_FILES[@]}")" | sha256sum | cut -c1-16)
ROOTFS="$CACHE/rootfs-$ROOTFS_KEY"
IMAGE="$CACHE/image-$IMAGE_KEY"

case "${1:-}" in
--cache) echo "$CACHE"; exit 0 ;;
--check) [ -f "$IMAGE/done" ] && { echo "$IMAGE"; exit 0; }; exit 1 ;;
"") ;;
*) echo "usage: build-image.sh [--check|--cache]" >&2; exit 2 ;;
esac
[ -f "$IMAGE/done" ] && { echo "[build-image] cached: $IMAGE"; echo "$IMAGE"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "build-image: building the guest image needs root (debootstrap, chroot)" >&2; exit 1; }

mkdir -p "$CACHE"
# One build at a time per cache (other developers may run the lab on this machine too).
exec 9>"$CACHE/.lock"
flock 9
[ -f "$IMAGE/done" ] && { echo "[build-image] cached: $IMAGE"; echo "$IMAGE"; exit 0; }
rm -rf "$CACHE"/.tmp-*   # left by a build that was killed (builds hold the lock)

TMP=""
cleanup() { [ -n "$TMP" ] && rm -rf "$TMP"; return 0; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
t0=$SECONDS

if [ ! -f "$ROOTFS/done" ]; then
    TMP="$CACHE/.tmp-rootfs-$ROOTFS_KEY-$$"
    rm -rf "$TMP"
    echo "[build-image] building the Debian root file system (key $ROOTFS_KEY; needs the apt mirror, ~3-5 min)"
    "$LAB/scripts/build-rootfs.sh" "$TMP"
    touch "$TMP/done"
    rm -rf "$ROOTFS"; mv "$TMP" "$ROOTFS"; TMP=""
fi

TMP="$CACHE/.tmp-image-$IMAGE_KEY-$$"
rm -rf "$TMP"; mkdir -p "$TMP"
S="$TMP/staging"
echo "[build-image] image $IMAGE_KEY: root file system + lab programs"
# A hard-linked copy: costs no space; only new files are written into it below.
cp -al "$ROOTFS/root" "$S"
install -D -m 0755 "$LAB/guest/lab-init" "$S/usr/local/sbin/lab-init"
install -D -m 0755 "$LAB/guest/smcdiag.py" "$S/usr/local/bin/smcdiag"
install -D -m 0755 "$LAB/guest/smc_run" "$S/usr/local/bin/smc_run"
mkdir -p "$S/usr/local/src/smclab" "$S/lab" "$S/out"
cp "$LAB/guest/smcpingpong.c" "$LAB/guest/smcxfer.c" "$LAB/guest/smcpreload.c" "$LAB/guest/labpoweroff.c" "$S/usr/local/src/smclab/"
# Compile inside the guest's own userland (its gcc and glibc), /dev bound for gcc.
unshare --mount --propagation private /bin/sh -c '
    set -e; mount --bind /dev "$1/dev"
    exec chroot "$1" /usr/bin/env -i PATH=/usr/bin:/bin /bin/sh -ec "
        cd /usr/local/src/smclab
        gcc -O2 -Wall -Werror -o /usr/local/bin/smcpingpong smcpingpong.c
        gcc -O2 -Wall -Werror -o /usr/local/bin/smcxfer smcxfer.c -lpthread
        gcc -O2 -Wall -Werror -shared -fPIC -o /usr/local/lib/libsmcpreload.so smcpreload.c -ldl
        gcc -O2 -Wall -Werror -o /usr/local/sbin/labpoweroff labpoweroff.c"' sh "$S"

KVER=$(ls "$S/lib/modules" | sort -V | tail -n1)
cp -L "$S/boot/vmlinuz-$KVER" "$TMP/vmlinuz"
cp -L "$S/boot/initrd.img-$KVER" "$TMP/initrd.img"
cp "$ROOTFS/versions.txt" "$TMP/versions.txt"
echo "image $IMAGE_KEY rootfs $ROOTFS_KEY built $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$TMP/versions.txt"
mkfs.ext4 -q -F -L smclab -d "$S" "$TMP/rootfs.img" 2G
rm -rf "$S"
touch "$TMP/done"
rm -rf "$IMAGE"; mv "$TMP" "$IMAGE"; TMP=""

# Keep the two newest entries of each level (the current one included).
for level in rootfs image; do
    ls -1dt "$CACHE/$level"-* 2>/dev/null | tail -n +3 | while read -r old; do
        [ "$old" = "$ROOTFS" ] || [ "$old" = "$IMAGE" ] || rm -rf "$old"
    done
done
echo "[build-image] image ready in $((SECONDS - t0))s: $IMAGE"
echo "$IMAGE"
