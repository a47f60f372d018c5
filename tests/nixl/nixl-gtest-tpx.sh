#!/bin/sh
# Instantiates NIXL's parameterised transfer tests (test/gtest/test_transfer.cpp)
# for the TPX backend, in a scratch copy of NIXL's sources given as $1 (called
# by scripts/build-testdeps.sh before NIXL is configured; the project never
# carries NIXL's sources). Parameters: backend, progress thread, workers,
# threads, engine config, as in NIXL's own UCX lines.
set -eu
f=$1/test/gtest/test_transfer.cpp
grep -q 'NIXL_INSTANTIATE_TEST(ucx, TestTransfer,' "$f" || {
  echo "nixl-gtest-tpx: $f has no UCX TestTransfer instantiation to follow" >&2; exit 1; }
grep -q '"TPX"' "$f" && exit 0
cat >>"$f" <<'EOT'

namespace gtest {
NIXL_INSTANTIATE_TEST(tpx, TestTransfer, "TPX", true, 1, 0, "");
NIXL_INSTANTIATE_TEST(tpx_no_pt, TestTransfer, "TPX", false, 1, 0, "");
NIXL_INSTANTIATE_TEST(tpx, TestListener, "TPX", true, 1, 0, "");
} // namespace gtest
EOT
