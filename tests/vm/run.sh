#!/usr/bin/env bash
# graid's VM test harness, host side.
#
# Boots a Debian kernel (bookworm-backports' 6.12.y by default, trixie-backports' 7.3.y with
# --kernel 7.3: ublk_drv, nvme, md, nvmet) under qemu with
# TCG (never KVM: guests die under it on the build machines) and six emulated NVMe drives, copies
# graidd, graidctl and graid-bench (plus their shared libraries) into an initramfs together with
# fio, mdadm, nvme-cli, e2fsprogs and the guest scenarios, runs the scenarios, powers off and
# exits non-zero on any failure. docs/testing.md explains how to use it and how to write a guest
# script; `tests/vm/run.sh --help` lists the options.
#
# Layout of the work dir ($GRAID_VM_DIR, default /var/tmp/graid-vm):
#   apt/ debs/ kernel/<version>/   private apt state (apt-<suite>/ for other suites than
#                                  bookworm-backports), the kernel .debs, the unpacked kernel (cached)
#   runs/<stamp>/                  one run: initramfs, disk images (deleted at the end), serial.log,
#                                  share/ (the guest's 9p share: results.txt, logs/, qmp/)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
T0=${EPOCHREALTIME/./}

# ---------------------------------------------------------------------------------------------
# options

usage() {
  cat <<'EOF'
usage: tests/vm/run.sh [options]

  --scenario NAME      run tests/vm/scenarios/NAME.sh in the guest (repeatable); NAME may also
                       be a set: "short" (the CI short form) or "all" (every scenario, full length)
  --short              the CI short form: ublk-raid and hot-remove; every scenario of the run
                       (these and any named) in its short version
  --guest-script FILE  run FILE in the guest after the scenarios (alone when none is named)
  --extra-bin PATH     copy one more host binary (and its libraries) into the guest's PATH (repeatable)
  --build DIR          where graidd, graidctl and graid-bench are built (default: $GRAID_VM_BUILD,
                       else build/release)
  --smp N              guest vCPUs (default 2)
  --mem MB             guest memory (default 2048)
  --lba 512|4096       logical (and physical) block size of the emulated NVMe drives (default 512)
  --kernel 6.12|7.3|both
                       the guest kernel: 6.12 (bookworm-backports, the default and CI's) or 7.3
                       (trixie-backports); both: the whole run once on each, one after the other
  --timeout SECONDS    kill the guest after this long (default 900 for the short form, 3600 otherwise)
  --keep-images        keep the run's disk images and initramfs (normally deleted at the end)
  --list               list the scenarios and sets, then exit

With neither --scenario nor --guest-script the short form runs.

Environment: GRAID_VM_DIR (work dir, default /var/tmp/graid-vm), GRAID_VM_BUILD (build dir),
GRAID_VM_KVER (a kernel version, e.g. 6.12.38+deb12-amd64, instead of the newest of the series),
GRAID_VM_KERNEL (the --kernel default), GRAID_VM_KERNEL_REFRESH=1 (look for a newer kernel of the
series in its suite), GRAID_VM_DISK_MB (size of
each emulated drive, default 256), GRAID_VM_MODULES (more kernel modules for the guest),
GRAID_VM_SCENARIO_TIMEOUT (seconds each scenario may take, default the --timeout less 60),
GRAID_VM_GRAIDD_ARGS (options for every graidd the scenarios start, e.g. "--ublk-copy user"),
GRAID_VM_SKIP=1 (print SKIP and exit 0 without doing anything). Every GRAID_VM_* variable is
also set in the guest.
EOF
}

scenarios=() guest_script="" extra_bins=() short=0 list=0 keep_images=0 timeout=""
build=${GRAID_VM_BUILD:-$TOP/build/release}
smp=2 mem=2048 lba=512
kernel=${GRAID_VM_KERNEL:-6.12}
args=("$@")
disk_mb=${GRAID_VM_DISK_MB:-256}
W=${GRAID_VM_DIR:-/var/tmp/graid-vm}

die() { echo "run.sh: $*" >&2; exit 2; }
need_arg() { (($# >= 2)) || die "$1 needs an argument"; }
while (($#)); do
  case $1 in
    --scenario) need_arg "$@"; scenarios+=("$2"); shift ;;
    --short) short=1 ;;
    --guest-script) need_arg "$@"; guest_script=$2; shift ;;
    --extra-bin) need_arg "$@"; extra_bins+=("$2"); shift ;;
    --build) need_arg "$@"; build=$2; shift ;;
    --smp) need_arg "$@"; smp=$2; shift ;;
    --mem) need_arg "$@"; mem=$2; shift ;;
    --lba) need_arg "$@"; lba=$2; shift ;;
    --kernel) need_arg "$@"; kernel=$2; shift ;;
    --timeout) need_arg "$@"; timeout=$2; shift ;;
    --keep-images) keep_images=1 ;;
    --list) list=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done

if [[ ${GRAID_VM_SKIP:-0} == 1 ]]; then
  echo "SKIP: graid VM tests (GRAID_VM_SKIP=1)"
  exit 0
fi

# The guest kernel series: the Debian suite that has it and the ABI names it comes under.
case $kernel in
  6.12) kernel_suite=bookworm-backports kernel_abi_re='6\.12\.[0-9]+\+deb12-amd64' ;;
  7.3) kernel_suite=trixie-backports kernel_abi_re='7\.3\.[0-9]+\+deb13-amd64' ;;
  both)
    # The same run on each kernel in turn; fails if either does.
    rest=() skip=0
    for a in "${args[@]}"; do
      if ((skip)); then skip=0; continue; fi
      [[ $a == --kernel ]] && { skip=1; continue; }
      rest+=("$a")
    done
    both_rc=0
    for k in 6.12 7.3; do
      echo "===== graid VM tests on Linux $k ====="
      GRAID_VM_KERNEL=$k "$0" "${rest[@]}" || both_rc=1
    done
    ((both_rc == 0)) && echo "PASS: graid VM tests on both kernels" || echo "FAIL: graid VM tests (see above)"
    exit "$both_rc"
    ;;
  *) die "--kernel takes 6.12, 7.3 or both" ;;
esac

# Scenario sets. The order of "all" matters: hot-remove takes a drive away (and puts a blank one
# back), so it runs last.
SET_SHORT=(ublk-raid hot-remove)
SET_ALL=(ublk-raid ublk-spread ublk-batch ublk-zero-copy passthrough kill-recover ublk-busy ublk-held ublk-foreign ublk-resize rebuild-kill nvmet graid-nbd md-compare nvme-health hot-remove)

scenario_description() { sed -n 's/^# description: //p' "$HERE/scenarios/$1.sh" | head -n 1; }

if ((list)); then
  echo "scenarios (tests/vm/scenarios/):"
  for f in "$HERE"/scenarios/*.sh; do
    n=${f##*/}; n=${n%.sh}
    printf '  %-14s %s\n' "$n" "$(scenario_description "$n")"
  done
  echo "sets:"
  echo "  short          ${SET_SHORT[*]} (short versions; also --short)"
  echo "  all            ${SET_ALL[*]}"
  exit 0
fi

[[ $lba == 512 || $lba == 4096 ]] || die "--lba takes 512 or 4096"
[[ $smp =~ ^[0-9]+$ && $mem =~ ^[0-9]+$ && $disk_mb =~ ^[0-9]+$ ]] || die "--smp, --mem and GRAID_VM_DISK_MB take numbers"
[[ -z $guest_script || -f $guest_script ]] || die "no such guest script: $guest_script"

# Expand sets; the short form is a set whose scenarios run in their short version.
selected=()
((short)) && scenarios=(short "${scenarios[@]}")
((${#scenarios[@]} == 0)) && [[ -z $guest_script ]] && scenarios=(short)
for s in "${scenarios[@]}"; do
  case $s in
    short) short=1; selected+=("${SET_SHORT[@]}") ;;
    all) selected+=("${SET_ALL[@]}") ;;
    *) [[ -f $HERE/scenarios/$s.sh ]] || die "no such scenario: $s (see --list)"; selected+=("$s") ;;
  esac
done
# drop repeats, keep the order
declare -A seen=()
scenario_list=()
for s in "${selected[@]}"; do [[ -n ${seen[$s]:-} ]] || { seen[$s]=1; scenario_list+=("$s"); }; done
timeout=${timeout:-$((short ? 900 : 3600))}

elapsed() { local n=${EPOCHREALTIME/./}; printf '%d.%d' $(((n - T0) / 1000000)) $(((n - T0) / 100000 % 10)); }
log() { printf '[%6ss] host: %s\n' "$(elapsed)" "$*"; }

# ---------------------------------------------------------------------------------------------
# 1. host packages, from Debian, installed only when missing

HOST_PACKAGES=(qemu-system-x86 busybox-static cpio socat kmod xz-utils fio mdadm nvme-cli
  e2fsprogs jq libnbd0 binutils)

install_host_packages() {
  local missing=() p
  for p in "${HOST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  [[ $(id -u) == 0 ]] || die "missing Debian packages (${missing[*]}); run as root or install them"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  log "packages installed"
}

# ---------------------------------------------------------------------------------------------
# 2. the guest kernel: the newest of the series in its suite (6.12.y from bookworm-backports;
#    bookworm's own 6.1 has no usable ublk; 7.3.y from trixie-backports), fetched with a private
#    apt configuration per suite so the system's apt sources and state stay untouched, and cached
#    under $W/kernel/<version>. The bookworm archive keyring verifies trixie-backports too.

# The private apt dir of the suite (apt/ for bookworm-backports, as before there were others).
APT_DIR=$W/apt
[[ $kernel_suite == bookworm-backports ]] || APT_DIR=$W/apt-$kernel_suite
# The cached version of the series.
CURRENT=$W/kernel/current
[[ $kernel == 6.12 ]] || CURRENT=$W/kernel/current-$kernel

apt_private() {  # apt-get/apt-cache with the private configuration
  local cmd=$1
  shift
  APT_CONFIG=$APT_DIR/apt.conf "$cmd" "$@"
}

setup_private_apt() {
  local A=$APT_DIR
  mkdir -p "$A"/{etc/parts.d,state/lists/partial,cache/archives/partial} "$W/debs"
  [[ -f $A/status ]] || : >"$A/status"
  # The mirror the system's own apt already uses (first non-security URI), else deb.debian.org.
  local mirror
  mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=$(awk '/^deb / && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=http://deb.debian.org/debian
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $kernel_suite main" \
    >"$A/etc/sources.list"
  # Dir::State::status points at an empty file: apt must not see (or touch) the host's dpkg state.
  cat >"$A/apt.conf" <<EOF
Dir::Etc::SourceList "$A/etc/sources.list";
Dir::Etc::SourceParts "$A/etc/parts.d";
Dir::State "$A/state";
Dir::State::status "$A/status";
Dir::Cache "$A/cache";
APT::Sandbox::User "root";
EOF
}

# Prints the version of the cached kernel to use, fetching it first when needed.
fetch_kernel() {
  local kver=${GRAID_VM_KVER:-}
  if [[ -z $kver && ${GRAID_VM_KERNEL_REFRESH:-0} != 1 && -s $CURRENT ]]; then
    kver=$(<"$CURRENT")
  fi
  if [[ -n $kver && -e $W/kernel/$kver/ready ]]; then
    echo "$kver"
    return
  fi
  setup_private_apt
  log "apt-get update ($kernel_suite, private apt state in $APT_DIR)" >&2
  apt_private apt-get update -qq >&2
  if [[ -z $kver || ${GRAID_VM_KERNEL_REFRESH:-0} == 1 ]]; then
    # The newest ABI of the series, e.g. linux-image-6.12.38+deb12-amd64 (linux-image-amd64
    # depends on the suite's newest, which may be of a later series).
    kver=$(apt_private apt-cache pkgnames linux-image- | sed -n "s/^linux-image-//p" |
      grep -E "^${kernel_abi_re}\$" | sort -V | tail -n 1 || true)
    [[ -n $kver ]] || die "could not find a Linux $kernel kernel (linux-image-$kernel.*-amd64) in $kernel_suite"
  fi
  if [[ ! -e $W/kernel/$kver/ready ]]; then
    # Up to 6.x one package holds the kernel and its modules; from 7.x linux-image-<abi> is a
    # meta package over linux-binary-<abi> (vmlinuz), linux-modules-<abi> and linux-base-<abi>.
    local pkgs=("linux-image-$kver") p deb
    if apt_private apt-cache show "linux-binary-$kver" >/dev/null 2>&1; then
      pkgs=("linux-binary-$kver" "linux-modules-$kver" "linux-base-$kver")
    fi
    log "downloading ${pkgs[*]}" >&2
    (cd "$W/debs" && apt_private apt-get download -qq "${pkgs[@]}") >&2
    rm -rf "$W/kernel/$kver.tmp"
    mkdir -p "$W/kernel/$kver.tmp"
    for p in "${pkgs[@]}"; do
      deb=$(find "$W/debs" -name "${p}_*.deb" | sort -V | tail -n 1)
      [[ -n $deb ]] || die "the download of $p left no .deb in $W/debs"
      dpkg-deb -x "$deb" "$W/kernel/$kver.tmp"
    done
    # Modules live in lib/modules or usr/lib/modules depending on the package's usrmerge state.
    local base=$W/kernel/$kver.tmp
    [[ -d $base/lib/modules/$kver ]] || ln -s usr/lib "$base/lib"
    depmod -b "$base" "$kver"
    touch "$base/ready"
    rm -rf "$W/kernel/$kver"
    mv "$base" "$W/kernel/$kver"
  fi
  echo "$kver" >"$CURRENT"
  echo "$kver"
}

# ---------------------------------------------------------------------------------------------
# 3. the initramfs: busybox, the tools and their libraries, the modules, graid, the scenarios

# Kernel modules the guest may need (their dependencies come along). crc32c_* because ext4 and
# raid456 ask the crypto API for "crc32c" at run time, which modprobe's dependency list misses;
# virtio_pci in case the 9p transport is not built in.
GUEST_MODULES=(nvme ublk_drv raid456 raid1 raid10 md_mod brd loop nbd nvmet nvme_loop nvme_fabrics
  ext4 crc32c_generic crc32c_intel 9p 9pnet_virtio virtio_pci)

# Host programs copied into the guest with their shared libraries. mke2fs is mkfs.ext4.
GUEST_TOOLS=(bash fio mdadm kmod nvme jq mke2fs e2fsck resize2fs blkid)

R=""  # initramfs root, set by build_initramfs

add_libs() {  # FILE...: the shared libraries FILE needs (ldd), at the same paths
  local f lib
  for f; do
    while read -r lib; do
      [[ -e $R$lib ]] || cp -L --parents "$lib" "$R"
    done < <(ldd "$f" 2>/dev/null | grep -oE '/[^ ]+' || true)
  done
}

add_program() {  # NAME: a host program (resolved through PATH) with its libraries, at its own path
  local src
  src=$(command -v "$1") || die "not found on this machine: $1"
  src=$(readlink -f "$src")
  install -D -m 755 "$src" "$R$src"
  add_libs "$src"
}

add_local_binary() {  # PATH: a program into /usr/local/bin with its libraries; ELF files lose
  # their debug info on the way (a RelWithDebInfo graidd is mostly DWARF: a smaller initramfs
  # boots faster)
  local dest=$R/usr/local/bin/${1##*/}
  objcopy --strip-debug "$1" "$dest" 2>/dev/null || install -m 755 "$1" "$dest"
  add_libs "$1"
}

build_initramfs() {  # KVER OUT
  local kver=$1 out=$2 kdir=$W/kernel/$1 d f m more=()
  R=$RUN/root
  rm -rf "$R"
  mkdir -p "$R"/usr/{bin,sbin,lib,lib64,local/bin} "$R"/{dev,proc,sys,tmp,run,mnt,etc,vm,root}
  for d in bin sbin lib lib64; do ln -s "usr/$d" "$R/$d"; done

  # busybox: an applet link for every name no real program takes.
  cp /bin/busybox "$R/usr/bin/busybox"
  for f in "${GUEST_TOOLS[@]}"; do add_program "$f"; done
  ln -sf mke2fs "$R/usr/sbin/mkfs.ext4"
  ln -sf e2fsck "$R/usr/sbin/fsck.ext4"
  for f in modprobe insmod rmmod lsmod modinfo depmod; do ln -sf ../bin/kmod "$R/usr/sbin/$f"; done
  while read -r f; do
    [[ -e $R$f || -L $R$f ]] || ln -s /usr/bin/busybox "$R$f"
  done < <(/bin/busybox --list-full | sed 's|^|/|; s|^/bin/|/usr/bin/|; s|^/sbin/|/usr/sbin/|')
  ln -sf busybox "$R/usr/bin/sh"
  cp /etc/mke2fs.conf "$R/etc/" 2>/dev/null || true
  ln -s /proc/mounts "$R/etc/mtab"
  echo "root:x:0:0:root:/root:/bin/bash" >"$R/etc/passwd"
  echo "root:x:0:" >"$R/etc/group"

  for f in daemon/graidd/graidd cli/graidctl bench/graid_bench/graid-bench; do
    [[ -x $build/$f ]] || die "$build/$f is missing: build first (cmake --preset release && cmake --build --preset release --target graidd graidctl graid-bench) or give --build DIR"
    add_local_binary "$build/$f"
  done
  for f in "${extra_bins[@]}"; do
    [[ -f $f && -x $f ]] || die "--extra-bin $f: not an executable file"
    add_local_binary "$f"
  done
  # A library cache so that libraries outside the default paths (e.g. a CUDA runtime with an
  # RPATH to /usr/local/cuda) are found as on the host.
  local dirs
  dirs=$(find "$R/usr" \( -name '*.so' -o -name '*.so.*' \) \( -type f -o -type l \) -printf '%h\n' | sed "s|^$R||" | sort -u)
  printf '%s\n' "$dirs" >"$R/etc/ld.so.conf"
  ldconfig -r "$R"

  # Kernel modules. Pitfall: Debian ships them xz-compressed; the kernel's own decompression
  # (CONFIG_MODULE_DECOMPRESS) cannot be relied on, and kmod first tries finit_module on the
  # compressed file, so they are decompressed here and depmod is run again on the result.
  local mods=("${GUEST_MODULES[@]}")
  read -r -a more <<<"${GRAID_VM_MODULES:-}"
  mods+=("${more[@]}")
  for m in "${mods[@]}"; do
    modprobe -d "$kdir" -S "$kver" --show-depends "$m" 2>/dev/null | awk '/^insmod/ {print $2}' || true
  done | sort -u | while read -r f; do
    (cd "$kdir" && cp --parents "${f#"$kdir"/}" "$R")
  done
  [[ -d $R/usr/lib/modules/$kver ]] || die "no modules copied from $kdir (modprobe --show-depends failed?)"
  find "$R/usr/lib/modules" -name '*.ko.xz' -exec xz -d {} +
  find "$R/usr/lib/modules" -name '*.ko.zst' -exec zstd -q -d --rm {} +
  local mdir
  mdir=$(readlink -f "$kdir/lib/modules/$kver")
  cp "$mdir"/modules.{order,builtin,builtin.modinfo} "$R/usr/lib/modules/$kver/"
  depmod -b "$R" "$kver"

  # The guest side of the harness and the scenarios.
  cp "$HERE"/guest/init "$R/init"
  cp "$HERE"/guest/*.sh "$R/vm/"
  mkdir -p "$R/vm/scenarios"
  cp "$HERE"/scenarios/*.sh "$R/vm/scenarios/"
  if [[ -n $guest_script ]]; then
    mkdir -p "$R/vm/guest-script"
    install -m 755 "$guest_script" "$R/vm/guest-script/${guest_script##*/}"
  fi
  chmod 755 "$R/init" "$R"/vm/*.sh "$R"/vm/scenarios/*.sh
  {
    # every GRAID_VM_* variable of the host's environment (parameters for guest scripts, e.g.
    # GRAID_VM_PERF_RUNTIME), then the harness's own, which take precedence
    local v
    for v in $(compgen -e | grep '^GRAID_VM_'); do printf '%s=%q\n' "$v" "${!v}"; done
    printf 'GRAID_VM_SCENARIOS=%q\n' "${scenario_list[*]}"
    printf 'GRAID_VM_GUEST_SCRIPT=%q\n' "${guest_script:+/vm/guest-script/${guest_script##*/}}"
    printf 'GRAID_VM_SHORT=%q\n' "$short"
    printf 'GRAID_VM_LBA=%q\n' "$lba"
    printf 'GRAID_VM_DISK_MB=%q\n' "$disk_mb"
    printf 'GRAID_VM_SCENARIO_TIMEOUT=%q\n' "${GRAID_VM_SCENARIO_TIMEOUT:-$(((timeout - 60) > 120 ? timeout - 60 : 120))}"
    printf 'GRAID_VM_HOT_IMAGES=%q\n' "hot0.img hot1.img"
  } >"$R/vm/config.sh"

  # Uncompressed on purpose: under TCG the guest decompresses a gzip initramfs slowly.
  (cd "$R" && find . | cpio -o -H newc --quiet) >"$out"
  rm -rf "$R"
}

# ---------------------------------------------------------------------------------------------
# 4. qemu: six NVMe drives, each on its own PCIe root port so that QMP device_del is a real
#    hot-remove (completed once the guest's pciehp lets the device go: about a second here; a
#    drive on the root bus could not be unplugged at all), and one empty root port (rp6) for
#    hot-adding a drive.

DRIVES=(nvme0 nvme1 nvme2 nvme3 nvme4 spare)

qemu_args=()
make_drives() {
  local i=0 id
  for id in "${DRIVES[@]}"; do
    truncate -s "${disk_mb}M" "$RUN/$id.img"
    qemu_args+=(
      -device "pcie-root-port,id=rp$i,chassis=$((i + 1)),slot=$((i + 1)),bus=pcie.0"
      -drive "file=$id.img,if=none,id=d$id,format=raw,cache=unsafe"
      -device "nvme,id=$id,serial=${id^^},drive=d$id,bus=rp$i,logical_block_size=$lba,physical_block_size=$lba")
    i=$((i + 1))
  done
  qemu_args+=(-device "pcie-root-port,id=rp$i,chassis=$((i + 1)),slot=$((i + 1)),bus=pcie.0")
  # blank images the guest may hot-add (blockdev-add by file name, relative to the run dir)
  truncate -s "${disk_mb}M" "$RUN/hot0.img" "$RUN/hot1.img"
}

# A guest line "@@QMP <id> <json>" asks for <json> to be sent to qemu's QMP monitor. The answer
# (every line after the capabilities handshake, events included) goes to share/qmp/<id>.reply,
# written whole (rename) so that the guest, polling the 9p share, never reads half of it.
qmp_request() {  # ID JSON
  local id=$1 json=$2 line reply=""
  coproc QMP { timeout 60 socat - "UNIX-CONNECT:$RUN/qmp.sock" 2>&1; }
  # greeting, capabilities handshake, then the command; events may come before its answer
  if read -r -t 10 line <&"${QMP[0]}" && echo '{"execute":"qmp_capabilities"}' >&"${QMP[1]}" &&
    read -r -t 10 line <&"${QMP[0]}" && echo "$json" >&"${QMP[1]}"; then
    while read -r -t 50 line <&"${QMP[0]}"; do
      reply+=$line$'\n'
      [[ $line == '{"return"'* || $line == '{"error"'* ]] && break
    done
  else
    reply='{"error": {"class": "HarnessError", "desc": "no QMP connection"}}'$'\n'
  fi
  kill "$QMP_PID" 2>/dev/null
  printf '%s' "$reply" >"$RUN/share/qmp/$id.tmp"
  mv "$RUN/share/qmp/$id.tmp" "$RUN/share/qmp/$id.reply"
  while IFS= read -r line; do emit "host: QMP< $line"; done <<<"${reply%$'\n'}"
}

# ---------------------------------------------------------------------------------------------
# main

install_host_packages
mkdir -p "$W/runs"
RUN=$W/runs/$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$RUN/share/qmp" "$RUN/share/logs"
log "run dir $RUN; scenarios: ${scenario_list[*]:-none}${guest_script:+; guest script $guest_script}$( ((short)) && echo ' (short)')"

# One kernel download at a time (runs from other worktrees share the cache).
exec 8>"$W/kernel.lock"
flock 8
KVER=$(fetch_kernel)
flock -u 8
log "kernel $KVER (Linux $kernel, $kernel_suite)"

build_initramfs "$KVER" "$RUN/initrd.cpio"
log "initramfs $(($(stat -c %s "$RUN/initrd.cpio") / 1048576)) MiB"
make_drives

qemu_pid=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  # set -e would end the trap at the first failing kill and make that the script's exit status
  set +e
  [[ -n $qemu_pid ]] && kill "$qemu_pid" 2>/dev/null
  jobs -p | xargs -r kill 2>/dev/null
  ((keep_images)) || rm -f "$RUN"/*.img "$RUN/initrd.cpio"
  # keep the last 10 runs' logs
  find "$W/runs" -mindepth 1 -maxdepth 1 -type d | sort | head -n -10 | xargs -r rm -rf
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Pitfall: -accel kvm is not an option on the build machines (guests die); TCG with -cpu max
# offers AVX2, enough for ISA-L. The 9p share (virtfs) carries results, logs and QMP answers; it
# is mounted with cache=none in the guest, so files the host writes show up at once.
cd "$RUN"
# /boot/vmlinuz-<abi> up to 6.x; 7.x's linux-binary puts it beside the modules.
VMLINUZ=$W/kernel/$KVER/boot/vmlinuz-$KVER
[[ -f $VMLINUZ ]] || VMLINUZ=$W/kernel/$KVER/usr/lib/modules/$KVER/vmlinuz
[[ -f $VMLINUZ ]] || die "no vmlinuz in the unpacked kernel $W/kernel/$KVER"
# Under TCG a 7.3 guest's TSC clocksource once jumped by days in the middle of md-compare (an RCU
# stall, then the scenario's timeout): on 7.x the guest keeps time with the HPET instead.
cmdline="console=ttyS0 panic=-1 loglevel=4 mitigations=off"
# GRAID_VM_CLOCK=tsc keeps the kernel's own choice (to measure what the HPET costs).
[[ $kernel == 6.12 || ${GRAID_VM_CLOCK:-} == tsc ]] || cmdline+=" clocksource=hpet tsc=unstable"
qemu=(timeout -k 10 "$timeout" qemu-system-x86_64
  -machine q35 -accel tcg -cpu max -smp "$smp" -m "$mem"
  -display none -monitor none -serial stdio -no-reboot -nic none
  -qmp "unix:$RUN/qmp.sock,server=on,wait=off"
  -kernel "$VMLINUZ" -initrd initrd.cpio
  -append "$cmdline"
  -virtfs "local,path=$RUN/share,mount_tag=graidshare,security_model=none"
  "${qemu_args[@]}")
log "starting qemu (TCG, -smp $smp -m $mem, ${#DRIVES[@]} NVMe drives of $disk_mb MiB, LBA $lba, timeout ${timeout}s)"

# The serial console is read line by line: each line is echoed with a host timestamp and kept in
# serial.log. The process substitution's last line carries qemu's exit status (after a newline:
# the console may stop in the middle of a line).
shopt -s extglob
exec 7>serial.log
emit() {  # LINE: to stdout and serial.log, with the host's timestamp
  local out
  printf -v out '[%6ss] %s' "$(elapsed)" "$1"
  printf '%s\n' "$out"
  printf '%s\n' "$out" >&7
}
qemu_rc=""
while IFS= read -r line || [[ -n $line ]]; do
  line=${line//$'\e'[\[(]*([0-9;?])[A-Za-z]/}
  line=${line%$'\r'}
  case $line in
    @@QEMU_EXIT\ *) qemu_rc=${line#@@QEMU_EXIT } ; continue ;;
    @@QEMU_PID\ *) qemu_pid=${line#@@QEMU_PID } ; continue ;;
  esac
  emit "$line"
  if [[ $line =~ ^@@QMP\ ([A-Za-z0-9_-]+)\ (.*)$ ]]; then
    emit "host: QMP> ${BASH_REMATCH[2]}"
    qmp_request "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" &
  fi
done < <(
  "${qemu[@]}" </dev/null 2>&1 &
  echo "@@QEMU_PID $!"
  rc=0
  wait $! || rc=$?  # (set -e holds in here too)
  printf '\n@@QEMU_EXIT %s\n' "$rc"
)
qemu_pid=""
wait  # QMP requests still running

# ---------------------------------------------------------------------------------------------
# verdict: from the share (the console can interleave kernel messages into a line)

rc=0
echo
echo "===== graid VM tests: summary ====="
if [[ -s share/results.txt ]]; then
  grep -vE '^[^ ]+ (PASS|INFO) ' share/results.txt | sed 's/^/  /' || true
  printf '  %d PASS, %d FAIL checks (all of them in %s)\n' \
    "$(grep -cE '^[^ ]+ PASS ' share/results.txt || true)" "$(grep -cE '^[^ ]+ FAIL ' share/results.txt || true)" \
    "$RUN/share/results.txt"
fi
for s in "${scenario_list[@]}" ${guest_script:+"guest:${guest_script##*/}"}; do
  line=$(grep -m1 "^$s " share/scenarios.txt 2>/dev/null || true)
  if [[ -z $line ]]; then
    echo "  FAIL $s: did not finish"
    rc=1
  else
    read -r _ s_rc s_secs <<<"$line"
    if [[ $s_rc == 0 ]]; then echo "  ok   $s (${s_secs}s)"; else echo "  FAIL $s: exit status $s_rc (${s_secs}s)"; rc=1; fi
  fi
done
if grep -qE '^[^ ]+ FAIL ' share/results.txt 2>/dev/null; then rc=1; fi
if [[ ! -e share/END ]]; then echo "  FAIL: the guest did not reach its end marker"; rc=1; fi
# A guest kernel panic, oops, BUG, WARNING or hung task fails the run even when every scenario
# passed (a ublk WARN_ON is exactly what the harness is for).
if grep -qE '\] (Kernel panic|Oops|BUG:|WARNING:|general protection fault|traps: PANIC|INFO: task .* blocked for more than)' serial.log; then
  echo "  FAIL: the guest kernel reported (serial.log):"
  grep -m 3 -E '\] (Kernel panic|Oops|BUG:|WARNING:|general protection fault|traps: PANIC|INFO: task .* blocked for more than)' serial.log |
    while IFS= read -r l; do echo "    $l"; done
  rc=1
fi
case ${qemu_rc:-?} in
  0) ;;
  124 | 137) echo "  FAIL: timed out after ${timeout}s (qemu killed)"; rc=1 ;;
  *) echo "  FAIL: qemu exit status ${qemu_rc:-unknown}"; rc=1 ;;
esac
echo "  logs: $RUN/serial.log, $RUN/share/logs/; wall time $(elapsed)s"
((rc == 0)) && echo "PASS: graid VM tests" || echo "FAIL: graid VM tests"
exit "$rc"
