# bash completion for graidctl (docs/cli.md, "Shell completion"). graidctl works out the
# candidates itself, from its own command tree and, for ids, from graidd:
# `graidctl __complete INDEX WORDS...` answers "words" or "files" on its first line, then the
# words. Installed as /usr/share/bash-completion/completions/graidctl; without the
# bash-completion package, `source` this file from ~/.bashrc.
_graidctl() {
  local cur=${COMP_WORDS[COMP_CWORD]} IFS=$'\n' out kind
  out=$("${COMP_WORDS[0]}" __complete "$((COMP_CWORD - 1))" "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
  kind=${out%%$'\n'*}
  out=${out#"$kind"}
  out=${out#$'\n'}
  case $kind in
    files)
      COMPREPLY=($(compgen -f -- "$cur"))
      compopt -o filenames 2>/dev/null
      ;;
    words) COMPREPLY=($(compgen -W "$out" -- "$cur")) ;;
  esac
  return 0
}
complete -F _graidctl graidctl
