# Sourced by scripts/build-testdeps.sh, scripts/build-tcpx-plugin.sh and
# scripts/third-party.sh: where the source tarballs, the carried tools and
# the build cache are.
# Sets repo, tools (TPX_TESTDEPS_TOOLS, absolute, or empty), cache
# (TPX_DEPS_CACHE, else /var/cache/tpx-testdeps when writable, else
# ~/.cache/tpx-testdeps) and tp, the tarballs (scripts/third-party.txt lists
# them): TPX_THIRD_PARTY, else the tools' third_party/, else
# ../shared/third_party beside the checkout when it exists, else
# $cache/third_party (where scripts/third-party.sh fetch puts them).
repo=$(dirname "$(cd "$(dirname "$0")" && pwd)")
tools=${TPX_TESTDEPS_TOOLS:-}
if [ -n "$tools" ]; then tools=$(cd "$tools" && pwd); fi
if [ -n "${TPX_DEPS_CACHE:-}" ]; then cache=$TPX_DEPS_CACHE
elif [ -w /var/cache ] || [ -w /var/cache/tpx-testdeps ]; then cache=/var/cache/tpx-testdeps
else cache=${XDG_CACHE_HOME:-$HOME/.cache}/tpx-testdeps
fi
if [ -z "${TPX_THIRD_PARTY:-}" ] && [ -n "$tools" ] && [ -d "$tools/third_party" ]; then
  TPX_THIRD_PARTY=$tools/third_party
fi
if [ -n "${TPX_THIRD_PARTY:-}" ]; then tp=$TPX_THIRD_PARTY
elif [ -d "$repo/../shared/third_party" ]; then tp=$repo/../shared/third_party
else tp=$cache/third_party
fi
