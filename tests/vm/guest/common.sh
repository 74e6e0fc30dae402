# shellcheck shell=bash
# tests/vm/guest/common.sh: definitions shared by the guest runner and lib.sh (bash). No side
# effects beyond defining things; the scenario helpers are in lib.sh.

# The host's 9p share (virtfs, mount tag graidshare): results.txt, scenarios.txt, logs/<name>/,
# qmp/<id>.reply. Mounted with cache=none so that what the host writes is seen at once.
GRAID_SHARE=/mnt/host
# shellcheck disable=SC2034 # used by the files that source this one
GRAID_RESULTS=$GRAID_SHARE/results.txt

# Seconds since the guest booted, e.g. 41.07.
up() {
  local u _
  read -r u _ </proc/uptime
  echo "$u"
}

# Sets GRAID_NVME0..GRAID_NVME4 and GRAID_SPARE (block devices, /dev/nvmeXnY) and GRAID_NG0..
# GRAID_NG4 and GRAID_NG_SPARE (their NVMe generic char devices, /dev/ngXnY) from the drives'
# serials (NVME0..NVME4, SPARE), exported; a drive that is not there leaves its variables unset.
# Pitfall: enumeration order is not stable (controllers probe in parallel) and with native NVMe
# multipath (Debian's default) the disk is named after the subsystem instance, not the
# controller, so names are never guessed. A namespace's serial is that of its parent device
# (controller, or subsystem under multipath): $sys/device/serial either way.
vm_resolve_drives() {
  local s var sys name
  unset GRAID_NVME0 GRAID_NVME1 GRAID_NVME2 GRAID_NVME3 GRAID_NVME4 GRAID_SPARE \
    GRAID_NG0 GRAID_NG1 GRAID_NG2 GRAID_NG3 GRAID_NG4 GRAID_NG_SPARE
  for sys in /sys/block/nvme* /sys/class/nvme-generic/ng*; do
    [[ -e $sys ]] || continue
    name=${sys##*/}
    [[ $name =~ ^(nvme|ng)[0-9]+n[0-9]+$ ]] || continue  # not the hidden per-path nodes
    s=$(cat "$sys/device/serial" 2>/dev/null) || continue
    s=${s//[[:space:]]/}
    case $s in
      NVME[0-4]) var=${s#NVME} ;;
      SPARE) var=_SPARE ;;
      *) continue ;;
    esac
    if [[ $name == ng* ]]; then var=GRAID_NG$var; else var=GRAID_NVME$var; fi
    [[ $var == GRAID_NVME_SPARE ]] && var=GRAID_SPARE
    export "$var=/dev/$name"
  done
}

# Prints the drive variables, one "NAME=/dev/..." per line.
vm_drive_vars() {
  local v
  for v in GRAID_NVME0 GRAID_NVME1 GRAID_NVME2 GRAID_NVME3 GRAID_NVME4 GRAID_SPARE \
    GRAID_NG0 GRAID_NG1 GRAID_NG2 GRAID_NG3 GRAID_NG4 GRAID_NG_SPARE; do
    [[ -n ${!v:-} ]] && echo "$v=${!v}"
  done
  return 0
}

# qmp JSON: has the host send JSON (one QMP command) to qemu's monitor, prints the answer and
# returns 0 when qemu answered "return", 1 on "error", 2 when no answer came in 60 s. The request
# travels as a console line "@@QMP <id> <json>"; the answer comes back as share/qmp/<id>.reply.
# Example: qmp '{"execute":"device_del","arguments":{"id":"nvme4"}}'
vm_qmp_seq=0
qmp() {
  local id reply i
  vm_qmp_seq=$((vm_qmp_seq + 1))
  id=g$$-$vm_qmp_seq-$RANDOM
  reply=$GRAID_SHARE/qmp/$id.reply
  echo "@@QMP $id $1" >/dev/console
  for ((i = 0; i < 300; i++)); do
    [[ -e $reply ]] && break
    sleep 0.2
  done
  if [[ ! -e $reply ]]; then
    echo "qmp: no answer from the host in 60 s to $1" >&2
    return 2
  fi
  cat "$reply"
  grep -q '^{"return"' "$reply" && ! grep -q '^{"error"' "$reply"
}
