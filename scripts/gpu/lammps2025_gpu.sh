#!/usr/bin/env bash
# GPU work without LAMMPS's KOKKOS package, in calls of <= 10 minutes on one warm GPU machine (repo root, .carry/
# carried; state between calls in $BATMOBILE_CACHE, default /tmp/batmobile-cache, and /tmp/bm_lammps2025):
#   scripts/gpu/lammps2025_gpu.sh build OUTDIR   LAMMPS 29 Sep 2021 + KOKKOS(CUDA) with the styles, and a stock LAMMPS
#       4 Feb 2025 with batmobileplugin.so whose Kokkos has CUDA (scripts/build_lammps.sh --lammps 2025 --backend
#       cuda --plugin-only), side by side
#   scripts/gpu/lammps2025_gpu.sh test OUTDIR    pair_style batmobile device cuda against the CPU style (energies,
#       forces, virial, per-atom terms; 1 and 2 ranks; a 40-step trajectory through re-neighbouring), in both builds;
#       the no-GPU error; batmobile/kk committees on the GPU (tests/lammps/batmobile/run_committee_test.py)
#   scripts/gpu/lammps2025_gpu.sh bench OUTDIR [MEMBER2.pt MEMBER3.pt]   bench/md/run_lammps2025_bench.sh (device cuda
#       in 2025 against batmobile/kk in 2021) and, with members, bench/md/run_committee_bench.sh
# OUTDIR is packed into OUTDIR.tgz at the end (the device tool brings back a limited number of files).
set -uo pipefail
MODE=${1:?usage: lammps2025_gpu.sh build|test|bench OUTDIR}
OUT=$(mkdir -p "${2:?usage: lammps2025_gpu.sh build|test|bench OUTDIR}" && cd "$2" && pwd); shift 2
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
export PYTHONPATH=$REPO/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
S=/tmp/bm_lammps2025; mkdir -p "$S"
T0=$(date +%s); say() { echo "[lammps2025_gpu $MODE +$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"; }
trap pack EXIT
# run NAME COMMAND...: COMMAND's output to OUT/NAME.log, one summary line
declare -a SUMMARY
run() {
  local name=$1 t rc; shift
  t=$(date +%s); "$@" > "$OUT/$name.log" 2>&1; rc=$?
  SUMMARY+=("$name: rc=$rc $(( $(date +%s) - t ))s $(grep -E '^(PASS|FAIL|SKIP)' "$OUT/$name.log" | tail -n1)")
  echo "${SUMMARY[-1]}"
}

case "$MODE" in
build)
  scripts/gpu/unpack_carry.sh > "$OUT/unpack.log" 2>&1 || say "unpack failed (is .carry/ carried?)"
  # two builds at once share the cores
  ( BATMOBILE_JOBS=$(( $(nproc) / 2 )) scripts/build_lammps.sh --backend cuda 2> "$OUT/build_kk.log" | tail -n1 > "$S/kk" ) &
  ( BATMOBILE_JOBS=$(( $(nproc) / 2 )) scripts/build_lammps.sh --lammps 2025 --backend cuda --plugin-only \
      2> "$OUT/build_2025.log" | tail -n1 > "$S/l25" ) &
  wait
  for b in kk l25; do say "$b: $(cat "$S/$b" 2>/dev/null)"; tail -n 3 "$OUT/build_${b/l25/2025}.log"; done
  ;;
test)
  KK=$(cat "$S/kk"); L25=$(cat "$S/l25")
  REF=$S/ref
  [ -f "$REF/model.pt" ] || python3 tests/lammps/batmobile/make_lammps_reference.py "$REF" > "$OUT/make_ref.log" 2>&1
  T=tests/lammps/batmobile/run_batmobile_test.py
  for b in L25 KK; do
    B=${!b}
    for v in device_cuda device_cuda_single device_cuda_mpi2; do run "${b}_reference_$v" python3 $T --build "$B" --ref "$REF" reference $v; done
    run "${b}_device_md_1" python3 $T --build "$B" --ref "$REF" device_md 1
    run "${b}_device_md_2" python3 $T --build "$B" --ref "$REF" device_md 2
    run "${b}_no_gpu" python3 $T --build "$B" --ref "$REF" no_gpu
    run "${b}_committee_values_device" python3 tests/lammps/batmobile/run_committee_test.py --build "$B" --ref "$REF" values_device
  done
  for v in values_kk steps_kk; do
    run "KK_committee_$v" python3 tests/lammps/batmobile/run_committee_test.py --build "$KK" --ref "$REF" $v
  done
  run KK_reference_gpu_single python3 $T --build "$KK" --ref "$REF" reference gpu_single
  printf '%s\n' "${SUMMARY[@]}" > "$OUT/summary.txt"
  ;;
bench)
  KK=$(cat "$S/kk"); L25=$(cat "$S/l25")
  source "$KK/batmobile-build.env"; LMPKK=$LMP
  source "$L25/batmobile-build.env"
  bench/md/run_lammps2025_bench.sh "$LMP" "$PLUGIN" "$LMPKK" potentials/water_fast.pt "$OUT/lammps2025" \
    > "$OUT/lammps2025_bench.log" 2>&1
  tail -n 4 "$OUT/lammps2025_bench.log"
  if [ $# -ge 1 ]; then
    bench/md/run_committee_bench.sh "$LMPKK" "$OUT/committee" potentials/water_fast.pt "$@" > "$OUT/committee_bench.log" 2>&1
    tail -n 3 "$OUT/committee_bench.log"
  fi
  ;;
*) echo "unknown mode $MODE" >&2; exit 2;;
esac
say done
