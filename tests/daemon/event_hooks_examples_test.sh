#!/bin/sh
# The example alert hooks (contrib/hooks) run as graidd runs them: `HOOK KIND DG [PD]` with
# GRAID_EVENT_* set. graid-syslog through a logger that records its arguments, graid-mail through
# a sendmail that records the mail. Usage: event_hooks_examples_test.sh CONTRIB_HOOKS_DIR
set -eu
hooks=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir "$tmp/bin"
cat >"$tmp/bin/logger" <<'X'
#!/bin/sh
printf '%s\n' "$@" >"$LOGGER_OUT"
X
cat >"$tmp/sendmail" <<'X'
#!/bin/sh
echo "args: $*" >"$MAIL_OUT"
cat >>"$MAIL_OUT"
X
chmod 755 "$tmp/bin/logger" "$tmp/sendmail"

export GRAID_EVENT_SEQ=118 GRAID_EVENT_TIME=2026-12-07T21:40:02.311Z GRAID_EVENT_SEVERITY=critical \
  GRAID_EVENT_KIND=member_failed GRAID_EVENT_DG=0 GRAID_EVENT_PD=1 GRAID_EVENT_SLOT=1 \
  GRAID_EVENT_MESSAGE="member slot 1 failed: marked offline"

LOGGER_OUT=$tmp/logger.out PATH="$tmp/bin:$PATH" "$hooks/graid-syslog" member_failed 0 1 ||
  fail "graid-syslog exited $?"
grep -qx -- '-t' "$tmp/logger.out" || fail "graid-syslog: no tag: $(cat "$tmp/logger.out")"
grep -qx 'daemon.crit' "$tmp/logger.out" || fail "graid-syslog: critical is not daemon.crit"
grep -qx 'critical member_failed dg 0 pd 1 (event 118): member slot 1 failed: marked offline' \
  "$tmp/logger.out" || fail "graid-syslog: the line: $(cat "$tmp/logger.out")"
GRAID_EVENT_SEVERITY=warning LOGGER_OUT=$tmp/logger.out PATH="$tmp/bin:$PATH" \
  "$hooks/graid-syslog" dg_degraded 0
grep -qx 'daemon.warning' "$tmp/logger.out" || fail "graid-syslog: warning is not daemon.warning"
grep -q '^warning dg_degraded dg 0 (event 118)' "$tmp/logger.out" ||
  fail "graid-syslog: a DG event: $(cat "$tmp/logger.out")"

# graidctl is not on this PATH: the mail goes without a status.
MAIL_OUT=$tmp/mail.out GRAID_SENDMAIL=$tmp/sendmail GRAID_MAIL_TO=ops@example.com \
  PATH=/usr/bin:/bin "$hooks/graid-mail" member_failed 0 1 || fail "graid-mail exited $?"
grep -qx 'args: -t -oi' "$tmp/mail.out" || fail "graid-mail: sendmail args: $(head -1 "$tmp/mail.out")"
grep -qx 'To: ops@example.com' "$tmp/mail.out" || fail "graid-mail: recipient"
grep -q '^Subject: graid critical on .*: member_failed dg 0 pd 1$' "$tmp/mail.out" ||
  fail "graid-mail: subject: $(grep Subject "$tmp/mail.out")"
grep -qx 'critical member_failed dg 0 pd 1: member slot 1 failed: marked offline' "$tmp/mail.out" ||
  fail "graid-mail: body: $(cat "$tmp/mail.out")"
# No sendmail anywhere: it fails, saying so.
if GRAID_SENDMAIL=$tmp/none PATH=/usr/bin:/bin "$hooks/graid-mail" test - 2>"$tmp/err" &&
  [ ! -x /usr/sbin/sendmail ] && [ ! -x /usr/lib/sendmail ]; then
  fail "graid-mail succeeded without a sendmail"
fi
echo "PASS: example hooks"
