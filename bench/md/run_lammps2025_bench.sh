#!/usr/bin/env bash
# GPU speed without LAMMPS's KOKKOS package: `pair_style batmobile device cuda` loaded as a plugin into a stock
# LAMMPS 4 Feb 2025 against batmobile/kk in LAMMPS 29 Sep 2021 (-k on g 1 -sf kk), same MD benchmark (in.md_bench:
# replicated 216-water box, NVE, fp32 kernels), the two alternating run by run. Writes OUTDIR/md_h200_lammps2025.json
# (bench/md/collect_lammps2025.py: per case steps_per_second, kk_steps_per_second, ratio_vs_kk and the 2025 runs'
# LAMMPS timing breakdown).
#   bench/md/run_lammps2025_bench.sh LMP2025 PLUGIN LMP_KK POTENTIAL OUTDIR [CASES]
# CASES: "atoms:rx:ry:rz:steps:repeats ..." (default 648, 10,368 and 97,200 atoms).
set -uo pipefail
USAGE="usage: run_lammps2025_bench.sh LMP2025 PLUGIN LMP_KK POTENTIAL OUTDIR [CASES]"
LMP25=${1:?$USAGE}; PLUGIN=${2:?$USAGE}; LMPKK=${3:?$USAGE}; POT=${4:?$USAGE}
OUT=$(mkdir -p "${5:?$USAGE}" && cd "$5" && pwd)
CASES=${6:-"648:1:1:1:1000:3 10368:2:2:4:200:3 97200:5:5:6:40:2"}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
source "$ROOT/bench/md/bench_common.sh"
DATA=$ROOT/examples/lammps_inputs/water216/water216_start.lmp
# the plugin run: load the styles, then the same benchmark input
printf 'plugin load %s\ninclude %s\n' "$PLUGIN" "$HERE/in.md_bench" > "$OUT/in.plugin_bench"
: > "$OUT/runs.txt"
for c in $CASES; do
  IFS=: read -r n rx ry rz ns reps <<<"$c"
  for ((r = 1; r <= reps; ++r)); do
    for kind in device_cuda kk; do
      log=$OUT/${kind}_${n}_r$r.log
      common=(-log "$log" -screen none -var data "$DATA" -var pot "$POT" -var rx "$rx" -var ry "$ry" -var rz "$rz"
              -var nsteps "$ns" -var nwarm 5 -var prec single)
      if [ $kind = kk ]; then
        # batmobile/kk at its fastest on one GPU: newton off (the model folds the images' forces; docs/performance.md)
        timeout 300 "$LMPKK" -k on g 1 -sf kk -pk kokkos newton on neigh half -in "$HERE/in.md_bench" "${common[@]}" \
          -var newton off
      else
        timeout 300 "$LMP25" -in "$OUT/in.plugin_bench" "${common[@]}" -var newton on -var pair_extra "device cuda"
      fi
      echo "$n $kind $r $(steps_per_second "$log")" | tee -a "$OUT/runs.txt"
    done
  done
done
COMMIT=$(bench_commit)
MACHINE=$(bench_machine)
python3 "$HERE/collect_lammps2025.py" "$OUT" --commit "$COMMIT" --machine "$MACHINE" \
  --command "bench/md/run_lammps2025_bench.sh LMP2025 PLUGIN LMP_KK $(basename "$POT") OUTDIR \"$CASES\"" \
  --out "$OUT/md_h200_lammps2025.json"
