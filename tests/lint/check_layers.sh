#!/usr/bin/env bash
# Fails when a file under src/ includes a header from a layer above its own.
# Layers: common < wire < {agent, server, cli, attach}; python > agent; cli > attach. Generated proto headers belong
# to wire. Usage: check_layers.sh SOURCE_DIR
set -u
src="${1:-.}/src"
fail=0
check() { # dir, forbidden-prefix-regex
  local dir=$1 re=$2
  [ -d "$src/$dir" ] || return 0
  local hits
  hits=$(grep -rnE "#include[[:space:]]+\"($re)/" "$src/$dir" --include='*.c' --include='*.h' 2>/dev/null || true)
  if [ -n "$hits" ]; then
    echo "layer violation in src/$dir:"; echo "$hits"; fail=1
  fi
}
check common 'wire|agent|server|cli|python|attach'
check wire 'agent|server|cli|python|attach'
check agent 'server|cli|python|attach'
check server 'agent|cli|python|attach'
check cli 'agent|python'
check attach 'agent|server|cli|python'
check python 'server|cli|attach'
n=$(find "$src" -name '*.[ch]' | wc -l)
if [ $fail -eq 0 ]; then echo "layers ok ($n files checked)"; echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
