#!/bin/sh
# The library boundary (docs/ARCHITECTURE.md, "Conventions"): libtpx.so
# exports exactly the public API, i.e. the functions and data declared with
# TPX_API in include/tpx/*.h, and libnccl-net-tpx.so exactly the ncclNet
# tables ncclNetPlugin_v7 .. ncclNetPlugin_v11. Everything else in src/ is
# compiled -fvisibility=hidden (the plugin also has its version script,
# src/plugin/exports.map).
#
# usage: check_exports.sh --cc CC --include DIR --lib LIBTPX_SO [--plugin PLUGIN_SO]
#                         [--archive LIBTPX_A]
#
# Fails (exit 1), listing the offenders, when
#  - libtpx.so exports a symbol that is not public (a leak),
#  - a public function or datum is not exported (a TPX_API left off, or a
#    definition that does not see its public declaration),
#  - a public header declares a tpx_* function or datum without TPX_API,
#  - the plugin exports anything but ncclNetPlugin_v7 .. _v11, or lacks one,
#  - (--archive) a global symbol of the static library is neither public nor
#    internal by name: internals carry the one prefix tpx__ (libuv's uv__),
#    so a static link next to NIXL, UCX or NCCL cannot collide either.
# The public names come from the headers themselves: each is preprocessed
# (comments gone, TPX_API expanded to its visibility attribute), cut into
# declarations at ';' '{' '}', and every tpx_* identifier followed by '('
# (a function) or, in a declaration that carries the attribute, the declared
# name (a datum) is taken.
set -eu

cc=cc inc= lib= plugin= archive=
while [ $# -gt 0 ]; do
  case "$1" in
    --cc) cc=$2; shift 2 ;;
    --include) inc=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --plugin) plugin=$2; shift 2 ;;
    --archive) archive=$2; shift 2 ;;
    *) echo "check_exports: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$inc" ] && [ -n "$lib" ] || { echo "usage: $0 --cc CC --include DIR --lib LIB [--plugin SO]" >&2; exit 2; }
[ -r "$lib" ] || { echo "check_exports: no library '$lib'" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Symbols the static linker defines in every shared object, whatever the code.
linker_syms='^(_init|_fini|_edata|_end|__bss_start)$'

# Defined dynamic symbols of $1, one name a line, sorted.
exports() {
  nm -D --defined-only "$1" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' |
    grep -Ev "$linker_syms" | LC_ALL=C sort -u
}

# ---- the public names, from the headers ----
: >"$tmp/decls"
for h in "$inc"/tpx/*.h; do
  # Declarations of this header only: -P drops line markers, so keep them
  # (no -P) and print only the lines that come from $h itself.
  "$cc" -E -x c -I "$inc" "$h" | awk -v h="$h" '
    /^# [0-9]+ "/ { split($0, f, "\""); cur = f[2]; next }
    /^#/ { next }
    cur == h' |
    tr '\n' ' ' | tr ';{}' '\n\n\n' >>"$tmp/decls"
  echo >>"$tmp/decls"
done
attr='visibility *\( *"default" *\)'
# Every function declared (any tpx_* name followed by '(').
grep -oE '\btpx_[a-z0-9_]+ *\(' "$tmp/decls" | sed 's/ *(//' | LC_ALL=C sort -u >"$tmp/declared_fn"
# Declarations that carry TPX_API: the function name, or the datum's name.
grep -E "$attr" "$tmp/decls" | sed -E "s/__attribute__ *\(\( *$attr *\)\)//" | awk '
  { if (match($0, /tpx_[a-z0-9_]+ *\(/)) { s = substr($0, RSTART, RLENGTH); sub(/ *\($/, "", s); print s; next }
    s = $0; sub(/[[:space:]]*(\[[^]]*\])?[[:space:]]*(=.*)?$/, "", s); n = split(s, w, /[^A-Za-z0-9_]+/)
    if (n > 0) print w[n] }' | LC_ALL=C sort -u >"$tmp/public"
# Data declared without the attribute: extern tpx_* objects.
grep -E '^ *extern ' "$tmp/decls" | grep -vE "$attr" |
  grep -oE '\btpx_[a-z0-9_]+ *(\[[^]]*\])? *$' | sed -E 's/ *(\[.*)?$//' | LC_ALL=C sort -u >"$tmp/declared_data" || true

status=0
report() { # title file
  if [ -s "$2" ]; then
    echo "FAIL: $1 ($(wc -l <"$2")):"
    sed 's/^/  /' "$2"
    status=1
  fi
}

LC_ALL=C comm -23 "$tmp/declared_fn" "$tmp/public" >"$tmp/noattr"
LC_ALL=C comm -23 "$tmp/declared_data" "$tmp/public" >>"$tmp/noattr"
report "declared in include/tpx/*.h without TPX_API" "$tmp/noattr"

exports "$lib" >"$tmp/lib_exports"
LC_ALL=C comm -23 "$tmp/lib_exports" "$tmp/public" >"$tmp/leaks"
LC_ALL=C comm -13 "$tmp/lib_exports" "$tmp/public" >"$tmp/missing"
report "$(basename "$lib") exports symbols that are not public API" "$tmp/leaks"
report "public API missing from $(basename "$lib")'s exports" "$tmp/missing"
echo "$(basename "$lib"): $(wc -l <"$tmp/lib_exports") exported, $(wc -l <"$tmp/public") public"

if [ -n "$plugin" ]; then
  [ -r "$plugin" ] || { echo "check_exports: no plugin '$plugin'" >&2; exit 2; }
  printf 'ncclNetPlugin_v%s\n' 7 8 9 10 11 | LC_ALL=C sort >"$tmp/plugin_want"
  exports "$plugin" >"$tmp/plugin_exports"
  LC_ALL=C comm -23 "$tmp/plugin_exports" "$tmp/plugin_want" >"$tmp/pleaks"
  LC_ALL=C comm -13 "$tmp/plugin_exports" "$tmp/plugin_want" >"$tmp/pmissing"
  report "$(basename "$plugin") exports more than ncclNetPlugin_v7..v11" "$tmp/pleaks"
  report "$(basename "$plugin") lacks" "$tmp/pmissing"
  echo "$(basename "$plugin"): $(wc -l <"$tmp/plugin_exports") exported"
fi

if [ -n "$archive" ]; then
  [ -r "$archive" ] || { echo "check_exports: no archive '$archive'" >&2; exit 2; }
  # _* and DW.ref.* are the compiler's (e.g. the C++ personality of .cu objects).
  nm --defined-only "$archive" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDRBCV]$/ { print $3 }' |
    grep -v '^tpx__' | grep -Ev '^_|^DW\.ref\.' | LC_ALL=C sort -u >"$tmp/archive_globals"
  LC_ALL=C comm -23 "$tmp/archive_globals" "$tmp/public" >"$tmp/unprefixed"
  report "$(basename "$archive") defines globals that are neither public nor tpx__ internals" "$tmp/unprefixed"
  [ -s "$tmp/unprefixed" ] || echo "$(basename "$archive"): every other global is tpx__"
fi

[ $status -eq 0 ] && echo "ok: exports match the public headers"
exit $status
