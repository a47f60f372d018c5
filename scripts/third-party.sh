#!/bin/sh
# The third-party source tarballs the tests build against (NIXL and what it
# needs, Google's GPUDirect-TCPX plugin, RxDM, NCCL's headers, UCX): where
# each comes from and how it is checked. They are test dependencies, built
# into a prefix outside the checkout; none of their code is in the project.
#
#   scripts/third-party.sh list            the manifest: file, project, version, licence, upstream
#   scripts/third-party.sh check           every tarball present in DIR and matching its hashes
#   scripts/third-party.sh fetch           fetch the missing ones from upstream into DIR
#   scripts/third-party.sh verify FILE...  those tarballs of DIR, checked (the build scripts)
#   scripts/third-party.sh tree-hash FILE  the content hash of a tarball (below)
#
# DIR: TPX_THIRD_PARTY (scripts/testdeps-paths.sh says the default). The
# manifest is scripts/third-party.txt, one line per tarball:
#
#   FILE TREE_SHA256 FILE_SHA256 KEEP LICENCE URL PROJECT VERSION
#
# FILE_SHA256 is the tarball's own hash. TREE_SHA256 is its content's: the
# sha256 of `sha256sum` over every file below the top folder, sorted by path,
# so the same sources repacked (another tar, gzip, or GitHub's archive of the
# same commit) match. KEEP is what is kept of the upstream archive: `all`, or
# the paths kept, comma-separated (headers-only tarballs). A tarball is taken
# when either hash matches. fetch downloads URL (curl, failing within
# seconds where no network is), keeps KEEP under FILE's top folder, repacks
# it as FILE and keeps it only when its TREE_SHA256 matches.
# Exit status: 0 when every tarball is there and checked (check, fetch); 1
# otherwise, each missing or mismatching tarball named; 2 on bad usage.
set -eu
. "$(dirname "$0")/testdeps-paths.sh"
manifest=${TPX_THIRD_PARTY_MANIFEST:-$repo/scripts/third-party.txt} # another one: tests only

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

tree_hash() { # FILE: content hash (see above)
  t=$(mktemp -d "${TMPDIR:-/tmp}/tpx-tp.XXXXXX")
  if ! tar -xzf "$1" -C "$t" 2>/dev/null; then
    rm -rf "$t"
    echo "unreadable"
    return
  fi
  top=$(find "$t" -mindepth 1 -maxdepth 1 -type d | head -n 1)
  (cd "$top" && find . -type f -print | LC_ALL=C sort | while IFS= read -r f; do
    printf '%s  %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)" "$f"
  done) | sha256sum | cut -d' ' -f1
  rm -rf "$t"
}

entries() { grep -v '^#' "$manifest" | grep -v '^[[:space:]]*$'; }

# 0 when FILE in DIR matches one of its hashes.
verified() { # FILE TREE FILESHA
  f=$tp/$1
  [ -r "$f" ] || return 1
  [ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$3" ] && return 0
  [ "$(tree_hash "$f")" = "$2" ]
}

cmd=${1:-}
case $cmd in
list)
  printf '%-42s %-10s %-14s %s\n' FILE LICENCE VERSION UPSTREAM
  entries | while read -r file tree fsha keep lic url proj ver; do
    printf '%-42s %-10s %-14s %s (%s%s)\n' "$file" "$lic" "$ver" "$url" "$proj" \
      "$([ "$keep" = all ] || echo ", kept: $keep")"
  done
  ;;
verify)
  # verify FILE...: those tarballs of DIR against the manifest (the build
  # scripts, before they build).
  shift
  for want in "$@"; do
    name=$(basename "$want")
    line=$(entries | awk -v n="$name" '$1 == n')
    [ -n "$line" ] || { echo "third-party: $name is not in scripts/third-party.txt" >&2; exit 1; }
    set -- $line
    verified "$1" "$2" "$3" || {
      echo "third-party: $tp/$name is missing or does not match scripts/third-party.txt" >&2
      exit 1
    }
  done
  ;;
tree-hash)
  [ $# -eq 2 ] || usage
  tree_hash "$2"
  ;;
check)
  bad=0
  entries | {
    while read -r file tree fsha keep lic url proj ver; do
      if [ ! -r "$tp/$file" ]; then
        echo "third-party: missing $tp/$file ($proj $ver)"
        bad=1
      elif ! verified "$file" "$tree" "$fsha"; then
        echo "third-party: $tp/$file does not match scripts/third-party.txt (neither its sha256 nor its content's)"
        bad=1
      fi
    done
    if [ "$bad" = 1 ]; then
      echo "third-party: scripts/third-party.txt lists where each comes from; scripts/third-party.sh fetch gets them" \
        "(network), or set TPX_THIRD_PARTY to a folder holding them"
      exit 1
    fi
    echo "third-party: every tarball of scripts/third-party.txt is in $tp and checked"
  }
  ;;
fetch)
  command -v curl >/dev/null 2>&1 || { echo "third-party: fetch needs curl" >&2; exit 1; }
  mkdir -p "$tp" 2>/dev/null || true
  [ -w "$tp" ] || { echo "third-party: $tp is not writable: set TPX_THIRD_PARTY to a folder to fill" >&2; exit 1; }
  entries | {
    bad=0
    offline=0
    while read -r file tree fsha keep lic url proj ver; do
      if verified "$file" "$tree" "$fsha"; then continue; fi
      if [ "$offline" = 1 ]; then
        bad=1
        continue
      fi
      t=$(mktemp -d "${TMPDIR:-/tmp}/tpx-fetch.XXXXXX")
      echo "third-party: fetching $proj $ver from $url"
      # Fail fast where no network is: 5 s to connect, then no retries.
      if ! curl -fsSL --connect-timeout 5 --max-time 600 -o "$t/up.tar.gz" "$url"; then
        echo "third-party: cannot fetch $url (no network here?): the rest are not tried" >&2
        rm -rf "$t"
        bad=1
        offline=1
        continue
      fi
      top=${file%.tar.gz}
      top=${top%-headers}
      mkdir -p "$t/x" "$t/out/$top"
      tar -xzf "$t/up.tar.gz" -C "$t/x"
      src=$(find "$t/x" -mindepth 1 -maxdepth 1 -type d | head -n 1)
      if [ "$keep" = all ]; then
        (cd "$src" && tar -cf - .) | (cd "$t/out/$top" && tar -xf -)
      else
        for k in $(echo "$keep" | tr ',' ' '); do
          (cd "$src" && tar -cf - "$k") | (cd "$t/out/$top" && tar -xf -)
        done
      fi
      (cd "$t/out" && tar -czf "$t/$file" "$top")
      got=$(tree_hash "$t/$file")
      if [ "$got" != "$tree" ]; then
        echo "third-party: $url does not hold what scripts/third-party.txt expects (content $got, not $tree): not used" >&2
        bad=1
      else
        mv "$t/$file" "$tp/$file"
        echo "third-party: $tp/$file (checked)"
      fi
      rm -rf "$t"
    done
    if [ "$bad" = 1 ]; then
      echo "third-party: some tarballs are still missing in $tp: scripts/third-party.txt lists where each" \
        "comes from; put them in a folder and set TPX_THIRD_PARTY to it" >&2
      exit 1
    fi
  }
  ;;
*) usage ;;
esac
