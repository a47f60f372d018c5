#!/bin/bash
# Two builds side by side (e.g. before / after an engine change), host memory
# over loopback, alternating builds and variants round by round so both see
# the same machine load; medians of GB/s and CPU seconds per GB (client line:
# the whole process, both ends). The KV-pattern ratios of issue 13 are
# printed per build.
#
# usage: bench/ab_compare.sh OLD_BUILD NEW_BUILD [OUT_DIR]
#   env: ROUNDS (5) ITERS (10) VARIANTS (see below)
set -euo pipefail
old=$1 new=$2
out=${3:-out/ab-$(date -u +%Y%m%d-%H%M%S)}
rounds=${ROUNDS:-5} iters=${ITERS:-10}
for b in "$old" "$new"; do [ -x "$b/tpx-bench" ] || { echo "ab_compare: $b/tpx-bench not built" >&2; exit 2; }; done
mkdir -p "$out"
export TPX_SOCKET_IFNAME=lo TPX_LOG=${TPX_LOG:-error}
{
  echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host:    $(uname -n) $(uname -r), $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, at start)"
  echo "old:     $old   new: $new   rounds: $rounds   iters: $iters"
} | tee "$out/machine.txt"
# name|tpx-bench options|environment (VAR=value ..., or empty; a build that
# does not know a variable ignores it)
variants=("contig_64M|--size 64M|" "kv_1000x64K|--block-size 64K --batch 1000|"
  "kv_1000x64K_pack64K|--block-size 64K --batch 1000|TPX_PACK_BYTES=64K" "kv_256x16K|--block-size 16K --batch 256|"
  "kv_1000x16K|--block-size 16K --batch 1000|" "kv_1000x8K|--block-size 8K --batch 1000|"
  "kv_1000x4K|--block-size 4K --batch 1000|" "kv_1000x4K_read|--block-size 4K --batch 1000 --op read|")
# VARIANTS="name|opts|env;name|opts|env" replaces the list (the first must be
# contig_64M: the ratios below are against it)
if [ -n "${VARIANTS:-}" ]; then IFS=';' read -r -a variants <<<"$VARIANTS"; fi
hdr="round"
for side in old new; do for v in "${variants[@]}"; do hdr="$hdr,${side}_${v%%|*},${side}_${v%%|*}_cpu"; done; done
echo "$hdr" >"$out/ab.csv"
for r in $(seq 1 "$rounds"); do
  declare -A res=()
  order=(old new)
  [ $((r % 2)) -eq 0 ] && order=(new old) # alternate which build goes first
  for v in "${variants[@]}"; do
    for side in "${order[@]}"; do
      b=$old
      [ "$side" = new ] && b=$new
      rest=${v#*|}
      opts=${rest%%|*} envs=${rest#*|}
      # shellcheck disable=SC2086
      env $envs "$b/tpx-bench" loopback $opts --iters "$iters" --warmup 2 --progress off >"$out/run.log" 2>&1 ||
        { echo "failed: $side $opts"; cat "$out/run.log"; exit 1; }
      g=$(sed -n 's/^\[PERF\] Avg .*BW: \([0-9.]*\) GB\/s.*/\1/p' "$out/run.log" | head -n 1)
      c=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' "$out/run.log" |
        awk '{ printf "%.3f", $1 + $2 }')
      res["${side}_${v%%|*}"]="$g,$c"
    done
  done
  row="$r"
  for side in old new; do for v in "${variants[@]}"; do row="$row,${res[${side}_${v%%|*}]}"; done; done
  echo "$row" | tee -a "$out/ab.csv"
done
python3 - "$out/ab.csv" <<'PY' | tee "$out/ab.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {k: statistics.median(float(r[k]) for r in rows) for k in rows[0] if k != "round"}
names = [k[4:] for k in med if k.startswith("old_") and not k.endswith("_cpu")]
print(f"{'variant':<20} {'old GB/s':>9} {'new GB/s':>9} {'old CPU s/GB':>13} {'new CPU s/GB':>13}   (medians of {len(rows)} rounds)")
for k in names:
    print(f"{k:<20} {med['old_' + k]:9.2f} {med['new_' + k]:9.2f} {med['old_' + k + '_cpu']:13.3f} {med['new_' + k + '_cpu']:13.3f}")
for side in ("old", "new"):
    for k in [n for n in names if n != "contig_64M"]:
        t = 0.8 if "64K" in k else 0.6 if k == "kv_256x16K" else None
        a = med[f"{side}_{k}"] / med[f"{side}_contig_64M"]
        ratios = sorted(float(r[side + '_' + k]) / float(r[side + '_contig_64M']) for r in rows)
        per = " ".join(f"{x:.2f}" for x in ratios)
        verdict = "" if t is None else f" (target >= {t}: {'met' if statistics.median(ratios) >= t else 'MISSED'} by the median round)"
        print(f"{side}: {k} vs one 64 MiB write: {a:.2f}x (medians), {statistics.median(ratios):.2f}x (median of the rounds'"
              f" ratios){verdict}, {med[side + '_contig_64M_cpu'] / med[side + '_' + k + '_cpu']:.2f}x by CPU per byte;"
              f" rounds sorted {per}")
PY
rm -f "$out/run.log"
echo "results in $out"
