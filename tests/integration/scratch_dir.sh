#!/bin/sh
# Prints a new temporary directory for member files: on tmpfs (/dev/shm) when it has at least
# 1 GiB free, so a benchmark test measures the engine rather than the root disk's flushes
# (which other processes' writes can stretch to hundreds of milliseconds); else under /tmp.
free_kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
if [ -n "$free_kib" ] && [ "$free_kib" -ge 1048576 ]; then
  exec mktemp -d -p /dev/shm
fi
exec mktemp -d
