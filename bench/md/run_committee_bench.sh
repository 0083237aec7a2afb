#!/usr/bin/env bash
# Cost of a committee on one GPU: the MD benchmark (in.md_bench, fp32 kernels, newton off) with one model against
# the same run with K members (the first drives the dynamics, the others every OUT_FREQ steps), alternating run by
# run; writes OUTDIR/committee_h200.json (bench/md/collect_committee.py) with per size the mean steps/s of each and
# overhead_fraction = 1 - committee / single (the larger of the sizes on top).
#   bench/md/run_committee_bench.sh LMP OUTDIR FIRST.pt MEMBER2.pt [MEMBER3.pt ...]
# Environment: BATMOBILE_COMMITTEE_CASES ("atoms:rx:ry:rz:steps:repeats ...", default 648 and 10,368 atoms),
# BATMOBILE_COMMITTEE_OUT_FREQ (default 100), LMP_ARGS (default -k on g 1 -sf kk -pk kokkos newton on neigh half).
set -uo pipefail
USAGE="usage: run_committee_bench.sh LMP OUTDIR FIRST.pt MEMBER.pt [MEMBER.pt ...]"
LMP=${1:?$USAGE}; OUT=$(mkdir -p "${2:?$USAGE}" && cd "$2" && pwd); shift 2
[ $# -ge 2 ] || { echo "$USAGE" >&2; exit 2; }
MODELS=("$@")
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
source "$ROOT/bench/md/bench_common.sh"
DATA=$ROOT/examples/lammps_inputs/water216/water216_start.lmp
CASES=${BATMOBILE_COMMITTEE_CASES:-"648:1:1:1:1000:5 10368:2:2:4:200:3"}
FREQ=${BATMOBILE_COMMITTEE_OUT_FREQ:-100}
read -r -a ACCEL <<<"${LMP_ARGS:--k on g 1 -sf kk -pk kokkos newton on neigh half}"
: > "$OUT/runs.txt"
for c in $CASES; do
  IFS=: read -r n rx ry rz ns reps <<<"$c"
  for ((r = 1; r <= reps; ++r)); do
    for kind in single committee; do
      log=$OUT/${kind}_${n}_r$r.log
      pot=${MODELS[0]}; extra=""
      if [ $kind = committee ]; then pot="${MODELS[*]}"; extra="out_freq $FREQ out_file $OUT/devi_${n}_r$r.out"; fi
      timeout 300 "$LMP" "${ACCEL[@]}" -in "$HERE/in.md_bench" -log "$log" -screen none -var data "$DATA" \
        -var pot "$pot" -var pair_extra "$extra" -var rx "$rx" -var ry "$ry" -var rz "$rz" -var nsteps "$ns" \
        -var nwarm 5 -var prec single -var newton off
      echo "$n $kind $r $(steps_per_second "$log")" | tee -a "$OUT/runs.txt"
    done
  done
done
COMMIT=$(bench_commit)
MACHINE=$(bench_machine)
python3 "$HERE/collect_committee.py" "$OUT/runs.txt" --members ${#MODELS[@]} --out-freq "$FREQ" --commit "$COMMIT" \
  --machine "$MACHINE" --command "BATMOBILE_COMMITTEE_CASES=\"$CASES\" bench/md/run_committee_bench.sh LMP OUTDIR \
$(for m in "${MODELS[@]}"; do basename "$m"; done | paste -sd' ') (${ACCEL[*]})" --out "$OUT/committee_h200.json"
