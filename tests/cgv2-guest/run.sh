#!/usr/bin/env bash
# Runs test binaries inside a throw-away QEMU guest whose only cgroup hierarchy
# is cgroup v2, so the sandbox's v2 code runs on any x86_64 Debian-like host,
# a cgroup-v1 one included. See README.md beside this file.
#
#   tests/cgv2-guest/run.sh [options] BINARY... [-- ARG...]
#
# Each BINARY is copied into the guest (debug info stripped) and run in turn,
# as root, with the ARGs and the -e environment, in a fresh cgroup. The guest's
# console is streamed to stdout; a summary with each binary's exit status
# follows. Exit status: 0 all passed, 1 some failed, 124 timed out, 125 the
# guest stopped before it finished (kernel panic, init failure), 2 bad usage,
# 3 the guest could not be prepared (apt, download).
#
# Options:
#   -k, --kernel K     6.1 (default), 6.12 or any X.Y: the newest Debian kernel
#                      package of that series in the apt index; or a package name
#                      such as linux-image-6.1.0-57-amd64
#   -e, --env NAME=VALUE    environment of the tests (repeatable)
#   -s, --share DIR    DIR of the host, read-write at the same path in the guest
#                      (virtio-9p; repeatable), e.g. the repository, so that
#                      CARGO_MANIFEST_DIR and CARGO_BIN_EXE_* stay valid
#   -l, --libs-of EXE  also copy the shared libraries EXE needs (a program the
#                      tests start from a share; repeatable)
#   -C, --cwd DIR      working directory of the tests (default: the first share, else /)
#   -t, --timeout S    limit for the whole guest, boot to power-off (default 900)
#   -m, --memory MIB   guest memory (default 1024)
#       --log FILE     keep the console output in FILE too
# Environment: CGV2_GUEST_CACHE holds the kernels and busybox (default
# target/cgv2-guest, or $CARGO_TARGET_DIR/cgv2-guest); CGV2_GUEST_ACCEL=kvm|tcg overrides
# the choice of accelerator; CGV2_GUEST_APPEND is added to the kernel command
# line (loglevel=7 shows the whole boot).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

say() { echo "cgv2-guest: $*" >&2; }
usage() { # exit status
  sed -n '/^#   tests/,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit "$1"
}
setup_failed() {
  say "$*"
  exit 3
}

kernel=6.1
envs=()
shares=()
libs_of=()
cwd=
timeout=900
memory=1024
log=
bins=()
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -k | --kernel) kernel=$2; shift 2 ;;
    -e | --env) envs+=("$2"); shift 2 ;;
    -s | --share) shares+=("$2"); shift 2 ;;
    -l | --libs-of) libs_of+=("$2"); shift 2 ;;
    -C | --cwd) cwd=$2; shift 2 ;;
    -t | --timeout) timeout=$2; shift 2 ;;
    -m | --memory) memory=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    --) shift; args=("$@"); break ;;
    -*) say "unknown option $1"; usage 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[ ${#bins[@]} -gt 0 ] || { say "no test binary given"; usage 2; }
for b in "${bins[@]}" ${libs_of[@]+"${libs_of[@]}"}; do
  [ -f "$b" ] && [ -x "$b" ] || { say "$b is not an executable file"; exit 2; }
done
for v in "${envs[@]+"${envs[@]}"}" ${args[@]+"${args[@]}"}; do
  case "$v" in *$'\n'*) say "a value with a newline cannot be passed: $v"; exit 2 ;; esac
done
for e in ${envs[@]+"${envs[@]}"}; do
  [[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || { say "-e wants NAME=VALUE, not $e"; exit 2; }
done
for i in "${!shares[@]}"; do
  [ -d "${shares[$i]}" ] || { say "--share ${shares[$i]}: not a directory"; exit 2; }
  shares[i]=$(cd "${shares[$i]}" && pwd -P)
  case "${shares[$i]}" in
    / | /dev | /dev/* | /proc | /proc/* | /sys | /sys/* | /usr | /usr/* | /guest | /guest/*)
      say "--share ${shares[$i]} would cover part of the guest's own system"; exit 2 ;;
  esac
done
[ -n "$cwd" ] || cwd=${shares[0]:-/}
[[ "$timeout" =~ ^[0-9]+$ && "$memory" =~ ^[0-9]+$ ]] || { say "-t and -m want numbers"; exit 2; }
[ "$(uname -m)" = x86_64 ] || setup_failed "the guest is x86_64; this host is $(uname -m)"
for tool in qemu-system-x86_64 cpio xz zstd flock; do
  command -v "$tool" >/dev/null || setup_failed "$tool is missing (apt-get install qemu-system-x86 cpio xz-utils zstd util-linux)"
done

# ---- the cache: kernels and busybox from Debian packages, extracted, never installed
cache=${CGV2_GUEST_CACHE:-${CARGO_TARGET_DIR:-$repo/target}/cgv2-guest}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
exec 8>"$cache/.lock"
flock -w 1800 8 || setup_failed "$cache is locked by another run for 30 minutes"

apt_updated=0
refresh_apt() { # once per run, and only when the index lacks what we look for
  [ $apt_updated = 0 ] || return 1
  apt_updated=1
  say "apt-get update (the package index lacks a package)"
  apt-get -qq update >&2 || true
}
# The .deb of NAME, downloaded into the directory $2.
download() {
  (cd "$2" && apt-get download -q -o APT::Sandbox::User=root "$1" >&2) || return 1
  ls "$2"/*.deb
}

case "$kernel" in
  linux-image-*) kernel_re="^${kernel//./\\.}\$" ;;
  [0-9]*.[0-9]*) kernel_re="^linux-image-${kernel//./\\.}\\.[0-9]+(-[0-9]+)?(\\+deb[0-9]+)?-amd64\$" ;;
  *) say "-k wants X.Y or a linux-image package name, not $kernel"; exit 2 ;;
esac
# What the apt index offers: the newest kernel package of the series, its
# version and busybox-static's (each apt-cache call reads the whole index,
# seconds on a busy machine, so two calls in all).
kpkg='' kversion='' bbversion=''
resolve() {
  local policy
  kpkg=$(apt-cache pkgnames linux-image- 2>/dev/null | grep -E "$kernel_re" | sort -V | tail -n1 || true)
  policy=$(apt-cache policy $kpkg busybox-static 2>/dev/null || true)
  kversion=$(awk -v p="$kpkg:" '$1 == p { on = 1 } on && $1 == "Candidate:" { print $2; exit }' <<<"$policy")
  bbversion=$(awk '$1 == "busybox-static:" { on = 1 } on && $1 == "Candidate:" { print $2; exit }' <<<"$policy")
  [ "$kversion" != "(none)" ] || kversion=
  [ "$bbversion" != "(none)" ] || bbversion=
  [ -n "$kpkg" ] && [ -n "$kversion" ] && [ -n "$bbversion" ]
}
resolve || { refresh_apt && resolve; } || true
# Offline, or the index dropped the package: what was cached before.
if [ -n "$kpkg" ] && [ -n "$kversion" ]; then
  kdir=$cache/${kpkg}_$kversion
else
  kdir=$(for d in "$cache"/linux-image-*/ready; do
    d=${d%/ready}
    [[ "$(basename "$d")" =~ ${kernel_re%\$}_ ]] && echo "$d" || true
  done | sort -V | tail -n1)
  [ -n "$kdir" ] && [ -e "$kdir/ready" ] || setup_failed "no Debian kernel package for '$kernel' in the apt index (and none cached)"
  say "no '$kernel' kernel in the apt index; using the cached $(basename "$kdir")"
fi
if [ -n "$bbversion" ]; then
  bbdir=$cache/busybox-static_$bbversion
else
  bbdir=$(for b in "$cache"/busybox-static_*/busybox; do [ -x "$b" ] && dirname "$b" || true; done | sort -V | tail -n1)
  [ -n "$bbdir" ] || setup_failed "no busybox-static in the apt index (and none cached)"
fi
kver=$(basename "$kdir")
kver=${kver#linux-image-}
kver=${kver%_*}

# The modules a 9p share needs, with their dependencies first (read from each
# module's own "depends=" field: a kernel package has no modules.dep, depmod
# writes it when the package is installed). Modules built into the kernel
# (modules.builtin) need nothing. 6.12's modules are xz-compressed, which
# busybox's insmod cannot load, so they are unpacked here.
share_modules="virtio_pci 9pnet_virtio 9p"
module_order() { # tree out
  local tree=$1 out=$2 seen=" " m
  add_module() {
    local m=$1 f dep
    case "$seen" in *" $m "*) return 0 ;; esac
    seen="$seen$m "
    f=$(find "$tree/kernel" -name "$m.ko" -o -name "$m.ko.xz" -o -name "${m//_/-}.ko" -o -name "${m//_/-}.ko.xz" | head -n1)
    if [ -z "$f" ]; then
      grep -qE "/(${m}|${m//_/-})\\.ko\$" "$tree/modules.builtin" && return 0
      say "kernel module $m: neither a file nor built in"
      return 1
    fi
    case "$f" in *.xz) xz -dc "$f" >"$out/$m.ko" ;; *) cp "$f" "$out/$m.ko" ;; esac
    for dep in $(tr '\0' '\n' <"$out/$m.ko" | sed -n 's/^depends=//p' | tr , ' '); do
      add_module "$dep" || return 1
    done
    echo "$m" >>"$out/order"
  }
  : >"$out/order"
  for m in $share_modules; do add_module "$m" || return 1; done
}

# Under emulation a compressed bzImage spends seconds unpacking itself, so the
# kernel proper (an ELF with a PVH entry note, which qemu boots directly) is
# taken out once: the boot protocol header says where the compressed payload is
# (setup_sects at 0x1f1, payload_offset and payload_length at 0x248; the last 4
# bytes of the payload are the uncompressed size, not part of the stream).
unpack_vmlinux() { # bzImage out
  local img=$1 out=$2 sects off len start unpack
  sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$img" | tr -d ' ')
  off=$(od -An -tu4 -j $((0x248)) -N4 "$img" | tr -d ' ')
  len=$(od -An -tu4 -j $((0x24c)) -N4 "$img" | tr -d ' ')
  start=$(((sects + 1) * 512 + off))
  case "$(od -An -tx1 -j "$start" -N4 "$img" | tr -d ' ')" in
    fd377a58) unpack="xz -dc --single-stream" ;;
    28b52ffd) unpack="zstd -dcq" ;;
    *) return 1 ;;
  esac
  dd if="$img" bs=1M iflag=skip_bytes,count_bytes skip="$start" count=$((len - 4)) status=none | $unpack >"$out.part" &&
    [ "$(od -An -tx1 -N4 "$out.part" | tr -d ' ')" = 7f454c46 ] && mv "$out.part" "$out"
}

if [ ! -e "$kdir/ready" ]; then
  say "caching $kpkg $kversion in $kdir (downloaded and unpacked, not installed)"
  t0=$SECONDS
  rm -rf "$kdir"
  mkdir -p "$kdir/dl" "$kdir/x" "$kdir/modules"
  deb=$(download "$kpkg" "$kdir/dl") || { refresh_apt && deb=$(download "$kpkg" "$kdir/dl"); } ||
    setup_failed "apt-get download $kpkg failed"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$kdir/x" "./boot/vmlinuz-$kver" "./boot/config-$kver" \
    "./lib/modules/$kver" || setup_failed "$deb: no kernel $kver in it"
  module_order "$kdir/x/lib/modules/$kver" "$kdir/modules" || setup_failed "$kpkg: the 9p modules are incomplete"
  if ! grep -q '^CONFIG_PVH=y' "$kdir/x/boot/config-$kver" || ! unpack_vmlinux "$kdir/x/boot/vmlinuz-$kver" "$kdir/vmlinux"; then
    say "booting the compressed kernel (no PVH entry, or its payload not found)"
    rm -f "$kdir/vmlinux.part"
    mv "$kdir/x/boot/vmlinuz-$kver" "$kdir/vmlinuz"
  fi
  rm -rf "$kdir/dl" "$kdir/x"
  # Older builds of the same series go (with their initramfs): this is the newest.
  for old in "$cache/linux-image-"*/; do
    old=$(basename "$old")
    [[ "$old" != "$(basename "$kdir")" && "$old" =~ ${kernel_re%\$}_ ]] || continue
    old=${old#linux-image-}
    rm -rf "$cache/linux-image-$old" "$cache/base-${old%_*}-"*.cpio
  done
  rm -f "$cache/base-$kver-"*.cpio
  touch "$kdir/ready"
  say "kernel cached in $((SECONDS - t0)) s"
fi
if [ -f "$kdir/vmlinux" ]; then kimage=$kdir/vmlinux; else kimage=$kdir/vmlinuz; fi

if [ ! -x "$bbdir/busybox" ]; then
  say "caching busybox-static $bbversion in $bbdir"
  rm -rf "$bbdir"
  mkdir -p "$bbdir/dl" "$bbdir/x"
  deb=$(download busybox-static "$bbdir/dl") || { refresh_apt && deb=$(download busybox-static "$bbdir/dl"); } ||
    setup_failed "apt-get download busybox-static failed"
  dpkg-deb -x "$deb" "$bbdir/x"
  mv "$bbdir/x/bin/busybox" "$bbdir/busybox"
  rm -rf "$bbdir/dl" "$bbdir/x"
  for old in "$cache"/busybox-static_*/; do [ "${old%/}" = "$bbdir" ] || rm -rf "$old"; done
fi

# ---- the initramfs: a cached base (busybox, /init, the modules) + this run's payload
cpio_of() { # dir out: every file of dir, owned by root
  (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$2"
}
base_id=$(cat "$here/init" "$bbdir/busybox" "$kdir/modules/order" | sha256sum | cut -c1-12)
base=$cache/base-${kver}-$base_id.cpio
if [ ! -s "$base" ]; then
  st=$(mktemp -d "$cache/stage.XXXXXX")
  # Debian 12's merged /usr: /bin, /sbin, /lib and /lib64 lead into /usr.
  mkdir -p "$st"/usr/bin "$st"/usr/lib64 "$st"/usr/lib/x86_64-linux-gnu "$st"/{dev,etc,guest/modules,newroot,proc,root,run,sys,tmp}
  ln -s usr/bin "$st/bin"
  ln -s usr/bin "$st/sbin"
  ln -s bin "$st/usr/sbin"
  ln -s usr/lib "$st/lib"
  ln -s usr/lib64 "$st/lib64"
  cp "$bbdir/busybox" "$st/usr/bin/busybox"
  for applet in $("$st/usr/bin/busybox" --list); do
    [ -e "$st/usr/bin/$applet" ] || ln -s busybox "$st/usr/bin/$applet"
  done
  install -m 0755 "$here/init" "$st/init"
  cp "$kdir"/modules/* "$st/guest/modules/"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$st/etc/passwd"
  printf 'root:x:0:\ntty:x:5:\nnogroup:x:65534:\n' >"$st/etc/group"
  printf '127.0.0.1\tlocalhost cgv2-guest\n::1\tlocalhost\n' >"$st/etc/hosts"
  [ "$(id -u)" != 0 ] || mknod -m 0600 "$st/dev/console" c 5 1
  cpio_of "$st" "$base.part" && mv "$base.part" "$base"
  rm -rf "$st"
  for old in "$cache/base-$kver-"*.cpio; do [ "$old" = "$base" ] || rm -f "$old"; done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cgv2-guest.XXXXXX")
qemu_pid=
reader_pid=
finish() {
  [ -z "$qemu_pid" ] || kill "$qemu_pid" 2>/dev/null || true
  [ -z "$reader_pid" ] || kill "$reader_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap finish EXIT
trap 'exit 130' INT TERM

p=$work/payload
mkdir -p "$p/guest/bin" "$p/usr/lib64" "$p/usr/lib/x86_64-linux-gnu"
ln -s usr/lib "$p/lib"
ln -s usr/lib64 "$p/lib64"
: >"$p/guest/order"
for b in "${bins[@]}"; do
  name=$(basename "$b")
  [ ! -e "$p/guest/bin/$name" ] || { say "two binaries are called $name"; exit 2; }
  # (the guest holds its payload in memory: debug info would double it)
  strip --strip-debug -o "$p/guest/bin/$name" "$b" 2>/dev/null || cp "$b" "$p/guest/bin/$name"
  echo "$name" >>"$p/guest/order"
done
# glibc and friends, at the paths the host's ldd names (through the same
# /lib -> usr/lib links on both sides).
for exe in "${bins[@]}" ${libs_of[@]+"${libs_of[@]}"}; do
  for lib in $(ldd "$exe" 2>/dev/null | grep -oE '/[^ ]+' || true); do
    [ -e "$p$lib" ] && continue
    mkdir -p "$(dirname "$p$lib")"
    cp -L "$lib" "$p$lib"
  done
done
: >"$p/guest/shares"
qemu_shares=()
for i in "${!shares[@]}"; do
  echo "share$i ${shares[$i]}" >>"$p/guest/shares"
  qemu_shares+=(-virtfs "local,path=${shares[$i]},mount_tag=share$i,security_model=none,id=share$i")
done
printf '%s\n' ${envs[@]+"${envs[@]}"} >"$p/guest/env"
printf '%s\n' ${args[@]+"${args[@]}"} >"$p/guest/args"
[ ${#args[@]} -gt 0 ] || : >"$p/guest/args"
[ ${#envs[@]} -gt 0 ] || : >"$p/guest/env"
echo "$cwd" >"$p/guest/cwd"
cpio_of "$p" "$work/payload.cpio"
cat "$base" "$work/payload.cpio" >"$work/initrd"
rm -rf "$p" "$work/payload.cpio"
exec 8>&- # the lock: the cache's part is done, other runs may change it now

# ---- boot
accel=${CGV2_GUEST_ACCEL:-}
if [ -z "$accel" ]; then
  # Only with hardware virtualization: some hosts (Firecracker VMs with PVM)
  # answer on /dev/kvm but run no stock kernel, which then hangs at boot.
  if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then accel=kvm; else accel=tcg; fi
fi
if [ "$accel" = kvm ]; then cpu=(-accel kvm -cpu host); else cpu=(-accel "tcg,thread=multi" -cpu max); fi
cmdline="console=ttyS0 quiet panic=-1 rdinit=/init cgroup_no_v1=all"
# Under emulation: skip the crypto self-tests (about a second of boot), and keep
# the TSC as the clock (the watchdog would distrust it and fall back to the HPET,
# where every clock_gettime traps into qemu).
[ "$accel" = kvm ] || cmdline="$cmdline cryptomgr.notests tsc=reliable"
cmdline="$cmdline ${CGV2_GUEST_APPEND:-}"
qemu=(qemu-system-x86_64 -nodefaults -no-user-config -no-reboot -display none -machine pc "${cpu[@]}"
  -smp 2 -m "$memory" -kernel "$kimage" -initrd "$work/initrd" -append "$cmdline"
  -chardev "stdio,id=console,signal=off${log:+,logfile=$log}" -serial chardev:console
  -serial "file:$work/status" ${qemu_shares[@]+"${qemu_shares[@]}"})

say "booting $kver ($accel, ${memory} MiB) for ${#bins[@]} binaries, at most $timeout s"
t0=$SECONDS
# The console: qemu writes it to a fifo, one reader drops the serial line's \r.
mkfifo "$work/console"
sed -u 's/\r$//' <"$work/console" &
reader_pid=$!
timeout -k 10 "$timeout" "${qemu[@]}" </dev/null >"$work/console" 2>&1 &
qemu_pid=$!
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=
wait "$reader_pid" || true
reader_pid=
elapsed=$((SECONDS - t0))
[ -z "$log" ] || sed -i 's/\r$//' "$log"

# ---- the report, from the status port
touch "$work/status"
tr -d '\r' <"$work/status" >"$work/status.txt"
failed=0
say "$kver, $accel: $elapsed s"
while read -r name; do
  end=$(awk -v n="$name" '$1 == "end" && $2 == n { print $3, $4 }' "$work/status.txt")
  if [ -n "$end" ]; then
    read -r rc centis <<<"$end"
    if [ "$rc" = 0 ]; then verdict=passed; else verdict="FAILED (exit status $rc)"; failed=1; fi
    say "  $name: $verdict after $((centis / 100)) s"
  elif grep -qxF "start $name" "$work/status.txt"; then
    say "  $name: did not finish"
  else
    say "  $name: not run"
  fi
done < <(printf '%s\n' "${bins[@]##*/}")
if ! grep -q '^up ' "$work/status.txt"; then
  say "the guest never reached its tests (the console above says why)"
fi
if grep -q '^error ' "$work/status.txt"; then
  say "the guest failed: $(sed -n 's/^error //p' "$work/status.txt" | head -n1)"
fi
if grep -qx "done" "$work/status.txt"; then
  [ $failed = 0 ] && { say "all passed"; exit 0; }
  exit 1
elif [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
  say "timed out after $timeout s"
  exit 124
else
  say "the guest stopped before it finished (qemu exit status $qemu_rc)"
  exit 125
fi
