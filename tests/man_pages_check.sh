#!/bin/sh
# graidd(8) and graidctl(8), as written at build time from the programs' option trees: man
# renders each without a warning, every option graidd --help lists is on graidd's page, and every
# command graidctl --help lists has a section on graidctl's (so a page cannot lag its program).
# Usage: man_pages_check.sh MAN_DIR GRAIDD GRAIDCTL
set -eu
dir=$1 graidd=$2 graidctl=$3
status=0
command -v man >/dev/null || { echo "man_pages: man is not installed (man-db)" >&2; exit 1; }
for page in graidd graidctl; do
  warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$dir/$page.8" 2>&1 >/dev/null) || {
    echo "man_pages: man could not render $page.8" >&2
    status=1
  }
  if [ -n "$warnings" ]; then
    echo "man_pages: $page.8 renders with warnings:" >&2
    echo "$warnings" >&2
    status=1
  fi
done
text=$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$dir/graidd.8" 2>/dev/null)
for opt in $("$graidd" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
  case $text in
    *"$opt"*) ;;
    *) echo "man_pages: graidd.8 lacks $opt" >&2; status=1 ;;
  esac
done
verbs=$("$graidctl" --help | sed -n '/^Subcommands:/,$p' | grep -E '^  [a-z]' |
  awk '{ sub(",", "", $1); print $1 }')
[ -n "$verbs" ] || { echo "man_pages: graidctl --help lists no commands" >&2; status=1; }
for verb in $verbs; do
  grep -q "^\.SS $verb\$" "$dir/graidctl.8" || { echo "man_pages: graidctl.8 lacks $verb" >&2; status=1; }
done
exit $status
