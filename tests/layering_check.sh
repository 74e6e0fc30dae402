#!/bin/sh
# The engine's folders are layers (docs/architecture.md): each may include the public headers
# (graid/), its own folder and the layers named below it here, never one above. Fails naming every
# include that breaks the rule.
set -eu
engine="$1/engine"
status=0
check() {  # folder, allowed include prefixes...
  dir="$1"
  shift
  allowed="graid $dir $*"
  for inc in $(grep -rhoE '#include "[a-z_]+/' "$engine/$dir" | sed 's/#include "//; s/\/$//' | sort -u); do
    case " $allowed " in
      *" $inc "*) ;;
      *)
        echo "layering: engine/$dir includes $inc/ headers:" >&2
        grep -rn "#include \"$inc/" "$engine/$dir" >&2
        status=1
        ;;
    esac
  done
}
check level
check geometry level
check parity
check io
check meta
check stripe
check journal
check state journal level meta stripe io parity
check queue state journal level meta stripe io parity
check array queue state journal level meta stripe io parity
check jobs array queue state journal level meta stripe io parity
exit $status
