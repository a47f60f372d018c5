#!/bin/sh
# scripts/third-party.sh on a manifest of its own (no network needed): a
# tarball is taken by its file hash or its content's; fetch repacks an
# upstream archive (here a file:// URL) keeping only KEEP, and keeps it only
# when the content matches; an unreachable upstream fails within seconds
# naming the manifest; and the real manifest's tarballs, where
# TPX_THIRD_PARTY (or the default folder) holds them, all check.
# Usage: third_party.sh SOURCE_DIR
set -u
src=$1
tps="$src/scripts/third-party.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/tpx-3p.XXXXXX") || exit 2
trap 'rm -rf "$t"' EXIT
fail() { echo "third_party: FAIL: $*" >&2; [ -f "$t/out" ] && cat "$t/out" >&2; exit 1; }

# An "upstream" archive: lib-1.0/{include/x.h,LICENSE,docs/big.txt}; what the
# tests use keeps include/ and LICENSE only.
mkdir -p "$t/up/lib-1.0-abcdef/include" "$t/up/lib-1.0-abcdef/docs" "$t/keep/lib-1.0/include"
echo '#define X 1' >"$t/up/lib-1.0-abcdef/include/x.h"
echo 'MIT' >"$t/up/lib-1.0-abcdef/LICENSE"
echo 'not kept' >"$t/up/lib-1.0-abcdef/docs/big.txt"
(cd "$t/up" && tar -czf "$t/upstream.tar.gz" lib-1.0-abcdef)
cp "$t/up/lib-1.0-abcdef/include/x.h" "$t/keep/lib-1.0/include/"
cp "$t/up/lib-1.0-abcdef/LICENSE" "$t/keep/lib-1.0/"
(cd "$t/keep" && tar -czf "$t/ref.tar.gz" lib-1.0)
tree=$(sh "$tps" tree-hash "$t/ref.tar.gz")
fsha=$(sha256sum <"$t/ref.tar.gz" | cut -d' ' -f1)
echo "lib-1.0-headers.tar.gz $tree $fsha include,LICENSE MIT file://$t/upstream.tar.gz Lib 1.0" >"$t/manifest"
export TPX_THIRD_PARTY_MANIFEST="$t/manifest"

mkdir -p "$t/dir"
TPX_THIRD_PARTY="$t/dir" sh "$tps" check >"$t/out" 2>&1 && fail "check passed with the tarball missing"
grep -q "scripts/third-party.txt lists where each comes from" "$t/out" || fail "check does not name the manifest"
TPX_THIRD_PARTY="$t/dir" sh "$tps" fetch >"$t/out" 2>&1 || fail "fetch from file:// failed"
TPX_THIRD_PARTY="$t/dir" sh "$tps" check >"$t/out" 2>&1 || fail "the fetched tarball does not check"
tar -tzf "$t/dir/lib-1.0-headers.tar.gz" | grep -q docs && fail "fetch kept what KEEP leaves out"

# Same sources packed another way: taken by the content's hash.
rm -f "$t/dir/lib-1.0-headers.tar.gz"
(cd "$t/keep" && tar -cf - lib-1.0 | gzip -9 >"$t/dir/lib-1.0-headers.tar.gz")
TPX_THIRD_PARTY="$t/dir" sh "$tps" check >"$t/out" 2>&1 || fail "a repacked tarball of the same sources refused"

# Other content: refused by check, and by fetch.
echo '#define X 2' >"$t/keep/lib-1.0/include/x.h"
(cd "$t/keep" && tar -czf "$t/dir/lib-1.0-headers.tar.gz" lib-1.0)
TPX_THIRD_PARTY="$t/dir" sh "$tps" check >"$t/out" 2>&1 && fail "changed sources accepted"
grep -q "does not match" "$t/out" || fail "the mismatch is not named"
echo '#define X 3' >"$t/up/lib-1.0-abcdef/include/x.h"
(cd "$t/up" && tar -czf "$t/upstream.tar.gz" lib-1.0-abcdef)
rm -f "$t/dir/lib-1.0-headers.tar.gz"
TPX_THIRD_PARTY="$t/dir" sh "$tps" fetch >"$t/out" 2>&1 && fail "a changed upstream accepted"
[ -f "$t/dir/lib-1.0-headers.tar.gz" ] && fail "a changed upstream's tarball kept"

# No network: fails at once (a closed local port), naming what to do.
sed "s|file://$t/upstream.tar.gz|http://127.0.0.1:9/lib.tar.gz|" "$t/manifest" >"$t/m2"
start=$(date +%s)
TPX_THIRD_PARTY_MANIFEST="$t/m2" TPX_THIRD_PARTY="$t/dir" sh "$tps" fetch >"$t/out" 2>&1 && fail "fetch passed offline"
[ $(($(date +%s) - start)) -le 10 ] || fail "fetch took over 10 s to fail"
grep -q "set TPX_THIRD_PARTY" "$t/out" || fail "no word of TPX_THIRD_PARTY"

# The real manifest, where its tarballs are here.
unset TPX_THIRD_PARTY_MANIFEST
if sh "$tps" check >"$t/out" 2>&1; then
  echo "third_party: the real manifest's tarballs are here and check"
elif grep -q "does not match" "$t/out"; then
  fail "a tarball here does not match scripts/third-party.txt"
else
  echo "third_party: the real manifest's tarballs are not all here (not checked)"
fi
echo "third_party: ok"
