#!/usr/bin/env bash
# Same-machine comparison of two source trees on one GPU (repo root; .carry/ carried where there is no network):
# builds LAMMPS + KOKKOS(CUDA) with the Batmobile styles for both trees, checks that both give the same energy and
# pressure (`run 0` with fp64 kernels at every case size: MD trajectories themselves diverge between any two runs),
# then times the MD benchmark (bench/md/in.md_bench, newton off on one rank) with the two builds alternating, run by
# run. Shows that a change keeps behaviour and speed. OUTDIR is packed into OUTDIR.tgz at exit.
#   scripts/gpu/compare_builds.sh build OLD_TREE OUTDIR
#       builds both trees (OLD_TREE and this checkout) in parallel, in their own process session, so that a build
#       that outlasts this call finishes on a machine kept warm for the next
#   scripts/gpu/compare_builds.sh bench [options] OLD_TREE OUTDIR
#       waits for the builds, runs the cases, writes OUTDIR/compare_builds.json
#     --cases "atoms:rx:ry:rz:steps:repeats ..."  (default "648:1:1:1:1000:4 10368:2:2:4:200:3 97200:5:5:6:30:3")
#     --potentials "NAME ..."   model files of the trees' potentials/, without .pt (default water_fast)
#     --precision P             precision of the timed runs (default mixed, the GPU default)
#     --trace "atoms:rx:ry:rz:steps[:labels] ..."  after the timings, the GPU timeline of each build in each case
#                               (cupti_trace, scripts/gpu/gpu_lib.sh) into OUTDIR/trace_{old,new}_<atoms>.*; labels 1
#                               adds a run that names each operation by its Kokkos label or host caller
# OLD_TREE: an unpacked source tree, e.g. `git archive <commit> | tar -x -C .old_tree` carried as .old_tree (for a
# tree of another LAMMPS stack, `scripts/prepare_carry.sh --legacy .old_tree` packs its sources).
set -uo pipefail
usage() { sed -n '7,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
MODE=${1:-}; shift || true
[ "$MODE" = build ] || [ "$MODE" = bench ] || usage
CASES="648:1:1:1:1000:4 10368:2:2:4:200:3 97200:5:5:6:30:3"; POTS=water_fast; PREC=mixed; TRACE=
while [ $# -gt 2 ]; do
  case "$1" in
    --cases) CASES=$2;; --potentials) POTS=$2;; --precision) PREC=$2;; --trace) TRACE=$2;;
    *) echo "error: unknown option $1" >&2; usage;;
  esac
  shift 2
done
[ $# -eq 2 ] || usage
for c in $CASES; do [[ $c =~ ^[0-9]+(:[0-9]+){5}$ ]] || { echo "error: --cases: '$c' is not atoms:rx:ry:rz:steps:repeats" >&2; exit 2; }; done
[[ $PREC =~ ^(single|mixed|double)$ ]] || { echo "error: --precision takes single, mixed or double" >&2; exit 2; }
OLD=$(cd "$1" && pwd) || usage
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
NEW=$(cd "$(dirname "$0")/../.." && pwd)
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
source "$NEW/scripts/common.sh"
source "$NEW/scripts/gpu/gpu_lib.sh"
trap 'pack_outdir "$OUT"' EXIT
STATE=$BATMOBILE_CACHE/compare_builds
mkdir -p "$STATE"
say() { echo "[compare_builds $(date +%T)] $*" | tee -a "$OUT/compare_builds.out"; }

build_tree() {  # build_tree NAME TREE: writes STATE/NAME.env (LMP=...) when done, STATE/NAME.failed otherwise
  local name=$1 tree=$2 b
  rm -f "$STATE/$name.env" "$STATE/$name.failed"
  if b=$(cd "$tree" && BATMOBILE_JOBS=$(( $(nproc) / 2 )) scripts/build_lammps.sh --backend cuda 2> "$STATE/$name.log" | tail -n1) &&
     [ -f "$b/batmobile-build.env" ]; then
    cp "$b/batmobile-build.env" "$STATE/$name.env"
  else
    touch "$STATE/$name.failed"
  fi
}

if [ "$MODE" = build ]; then
  unpack_carry > "$OUT/unpack.log" 2>&1 || { say "unpack failed (is .carry/ carried?)"; exit 1; }
  export -f build_tree; export STATE
  for pair in "old $OLD" "new $NEW"; do
    set -- $pair
    setsid bash -c "build_tree $1 $2" < /dev/null > /dev/null 2>&1 &
  done
  say "building old ($OLD) and new ($NEW) in the background"
  # wait here as long as this call allows, so that a short build needs no second call
  for _ in $(seq 1 110); do
    { [ -f "$STATE/old.env" ] || [ -f "$STATE/old.failed" ]; } && { [ -f "$STATE/new.env" ] || [ -f "$STATE/new.failed" ]; } && break
    sleep 5
  done
  for n in old new; do say "$n: $([ -f "$STATE/$n.env" ] && echo built || ([ -f "$STATE/$n.failed" ] && echo FAILED || echo still building))"; done
  cp "$STATE"/*.log "$OUT/" 2>/dev/null
  exit 0
fi

[ "$MODE" = bench ] || { echo "unknown mode $MODE" >&2; exit 2; }
for n in old new; do
  while [ ! -f "$STATE/$n.env" ] && [ ! -f "$STATE/$n.failed" ]; do
    # a machine that went back between the calls comes fresh: no build to wait for
    pgrep -f "build_tree $n " > /dev/null ||
      { say "no $n build on this machine: run 'compare_builds.sh build' first (in this call, or in one that follows within the idle window)"; exit 1; }
    sleep 5
  done
  [ -f "$STATE/$n.env" ] || { say "$n build failed:"; tail -n 30 "$STATE/$n.log"; exit 1; }
done
LMP_OLD=$(grep '^LMP=' "$STATE/old.env" | cut -d= -f2-)
LMP_NEW=$(grep '^LMP=' "$STATE/new.env" | cut -d= -f2-)
export CUDA_VISIBLE_DEVICES=0
RAW=$OUT/compare_raw.txt; : > "$RAW"
md() {  # md LOG LMP TREE RX RY RZ STEPS WARMUP PRECISION (potential $POT)
  md_bench_args "$1" "$3/potentials/$POT.pt" "$4" "$5" "$6" "$7" "$8" "$9"
  timeout 240 "$2" "${MD_BENCH_ARGS[@]}"
}
run_one() {  # run_one NAME TREE LMP ATOMS RX RY RZ STEPS REPEAT: a timed run
  local log="$OUT/md_$1_${POT}_$4_r$9.log" sps
  md "$log" "$3" "$2" "$5" "$6" "$7" "$8" 5 "$PREC"
  sps=$(grep -oE "[0-9.]+ timesteps/s" "$log" | tail -n1 | cut -d' ' -f1)
  echo "$1 $4 $9 ${sps:-nan} $POT" | tee -a "$RAW"
}
check_one() {  # check_one NAME TREE LMP ATOMS RX RY RZ PRECISION: `run 0`, the thermo line (step temp pe etotal press)
  local log="$OUT/check_$1_${POT}_$4_$8.log" thermo
  md "$log" "$3" "$2" "$5" "$6" "$7" 0 0 "$8"
  thermo=$(awk '/^ *Step /{t=1; next} /^Loop time/{t=0} t && NF==5 {line=$0} END{print line}' "$log" | tr -s ' ')
  if [ "$8" = double ]; then echo "check $1 $4 $POT |$thermo" | tee -a "$RAW"
  else echo "check_$8 $1 $4 $POT |$thermo" | tee -a "$OUT/compare_checks_$8.txt"; fi
}
# fp64 (the two builds must agree to the printed digits: collect_compare_builds.py checks it) and, for the record,
# the timed precision (rounding differs between builds that compile the kernels differently)
for POT in $POTS; do for c in $CASES; do
  IFS=: read -r n rx ry rz ns reps <<<"$c"
  for prec in double $([ "$PREC" = double ] || echo "$PREC"); do
    check_one old "$OLD" "$LMP_OLD" "$n" "$rx" "$ry" "$rz" "$prec"
    check_one new "$NEW" "$LMP_NEW" "$n" "$rx" "$ry" "$rz" "$prec"
  done
done; done
for POT in $POTS; do for c in $CASES; do
  IFS=: read -r n rx ry rz ns reps <<<"$c"
  for ((r = 1; r <= reps; ++r)); do
    # alternate which build runs first, so that a drift of the machine does not favour one
    if (( r % 2 )); then order="old new"; else order="new old"; fi
    for who in $order; do
      if [ "$who" = old ]; then run_one old "$OLD" "$LMP_OLD" "$n" "$rx" "$ry" "$rz" "$ns" "$r"
      else run_one new "$NEW" "$LMP_NEW" "$n" "$rx" "$ry" "$rz" "$ns" "$r"; fi
    done
  done
done; done
POT=water_fast
trace_build() {  # trace_build old|new SUFFIX LABELS: that build's timeline of the case n rx ry rz ns being traced
  local lmp=LMP_${1^^} tree=${1^^}
  cupti_trace "$OUT/libbm_cupti_trace.so" "${!lmp}" "${!tree}" "$OUT/trace_$1_$n$2" "$n" "$rx" "$ry" "$rz" "$ns" "$3"
}
if [ -n "$TRACE" ]; then
  if build_cupti_trace "$OUT/libbm_cupti_trace.so"; then
    for c in $TRACE; do
      IFS=: read -r n rx ry rz ns labels <<<"$c"
      for who in old new; do trace_build "$who" "" 0; done
      if [ "${labels:-0}" = 1 ]; then for who in old new; do trace_build "$who" _labels 1; done; fi
      for who in old new; do say "trace $who $n atoms: $(head -n1 "$OUT/trace_${who}_$n.txt" 2>/dev/null)"; done
    done
  else
    say "CUPTI trace library did not build: see libbm_cupti_trace.so.log"
  fi
fi
python3 "$NEW/bench/md/collect_compare_builds.py" "$RAW" "$OUT/compare_builds.json" \
  --old "$(cat "$OLD/.commit" 2>/dev/null || echo unknown)" --new "$(cat "$NEW/.commit" 2>/dev/null || git -C "$NEW" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --machine "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)" --precision "$PREC" \
  --command "scripts/gpu/compare_builds.sh bench --cases '$CASES' --potentials '$POTS' --precision $PREC $(basename "$OLD") OUTDIR"
