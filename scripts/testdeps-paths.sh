# Sourced by scripts/build-testdeps.sh and scripts/build-tcpx-plugin.sh: where
# the release tarballs, the carried tools and the build cache are.
# Sets repo, tools (TPX_TESTDEPS_TOOLS, absolute, or empty), tp (the tarballs:
# TPX_THIRD_PARTY, else the tools' third_party/, else ../shared/third_party)
# and cache (TPX_DEPS_CACHE, else /var/cache/tpx-testdeps when writable,
# else ~/.cache/tpx-testdeps).
repo=$(dirname "$(cd "$(dirname "$0")" && pwd)")
tools=${TPX_TESTDEPS_TOOLS:-}
if [ -n "$tools" ]; then tools=$(cd "$tools" && pwd); fi
if [ -z "${TPX_THIRD_PARTY:-}" ] && [ -n "$tools" ] && [ -d "$tools/third_party" ]; then
  TPX_THIRD_PARTY=$tools/third_party
fi
tp=${TPX_THIRD_PARTY:-$repo/../shared/third_party}
if [ -n "${TPX_DEPS_CACHE:-}" ]; then cache=$TPX_DEPS_CACHE
elif [ -w /var/cache ] || [ -w /var/cache/tpx-testdeps ]; then cache=/var/cache/tpx-testdeps
else cache=${XDG_CACHE_HOME:-$HOME/.cache}/tpx-testdeps
fi
