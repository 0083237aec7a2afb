# Sourced by the GPU scripts (scripts/gpu_check.sh, scripts/gpu/compare_builds.sh, scripts/cuda_compile_check.sh):
# the sources carried to a machine without network, the CUDA configure of a Batmobile source tree, the MD benchmark's
# command line for one GPU, and GPU timelines. Needs scripts/common.sh sourced first.

# unpack_carry: unpacks .carry/ (scripts/prepare_carry.sh, run where Debian's archive is reachable) into
# $BATMOBILE_CACHE/src, so that the build scripts find every source tree without network, then prepares the LAMMPS
# 2025 tree with the patched Kokkos and prints its path on the last line.
unpack_carry() (
  set -euo pipefail
  local c=$BATMOBILE_REPO/.carry a t
  [ -f "$c/SHA256SUMS" ] || { log "no $c/SHA256SUMS: run scripts/prepare_carry.sh and carry .carry"; exit 1; }
  (cd "$c" && sha256sum -c --quiet SHA256SUMS)
  mkdir -p "$BATMOBILE_CACHE/src"
  for a in "$c"/*.tar.xz; do
    t=$(basename "$a" .tar.xz)
    if [ ! -f "$BATMOBILE_CACHE/src/$t/.complete" ]; then
      rm -rf "${BATMOBILE_CACHE:?}/src/$t"
      tar -C "$BATMOBILE_CACHE/src" -xJf "$a"
      touch "$BATMOBILE_CACHE/src/$t/.complete"
    fi
  done
  "$BATMOBILE_REPO/scripts/prepare_sources.sh" lammps-2025
)

# configure_cuda_tree SRC BUILD ARCH [CMAKE_ARGS...]: configures a Batmobile source tree (Ninja, Release, C++17 as
# LAMMPS 2025's KOKKOS build) against the in-tree CUDA Kokkos 4.5.01 of LV/lib/kokkos (compiled through its
# nvcc_wrapper) and the carried GoogleTest, for ARCH (sm_90: Kokkos_ARCH_HOPPER90; sm_80: AMPERE80; sm_89: ADA89).
# Needs LV (the prepared sources: last line of unpack_carry) and BATMOBILE_CACHE.
# -arch leads CMAKE_CXX_FLAGS (a -DCMAKE_CXX_FLAGS=... among CMAKE_ARGS is appended to it): Kokkos 4's nvcc_wrapper
# falls back to sm_70 without an -arch (it ignores NVCC_WRAPPER_DEFAULT_ARCH), which nvcc 13 rejects, and CMake's
# compiler checks run it before Kokkos adds its own -arch.
configure_cuda_tree() {
  local src=$1 build=$2 arch=$3 a karch
  local flags="-arch=$arch" args=()
  shift 3
  case "$arch" in
    sm_90) karch=HOPPER90;; sm_80) karch=AMPERE80;; sm_86) karch=AMPERE86;; sm_89) karch=ADA89;;
    *) echo "configure_cuda_tree: no Kokkos architecture known for $arch" >&2; return 2;;
  esac
  for a in "$@"; do
    case "$a" in
      -DCMAKE_CXX_FLAGS=*) flags+=" ${a#-DCMAKE_CXX_FLAGS=}";;
      *) args+=("$a");;
    esac
  done
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$LV/lib/kokkos/bin/nvcc_wrapper" \
    -DCMAKE_CXX_STANDARD=17 -DBATMOBILE_KOKKOS_SOURCE="$LV/lib/kokkos" -DKokkos_ENABLE_CUDA=ON \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_$karch=ON -DCMAKE_CXX_FLAGS="$flags" \
    -DBATMOBILE_GTEST_SOURCE="$BATMOBILE_CACHE/src/googletest" -DBATMOBILE_PYTHON="$(command -v python3)" "${args[@]}"
}

# wait_gpu_idle MAX_S: waits (at most MAX_S seconds) until no process holds GPU 0, so that timings run alone; says
# what still holds it if the wait runs out. Without nvidia-smi it returns at once. (Test processes that a timeout
# has just stopped can hold GPU memory for a while.)
wait_gpu_idle() {
  command -v nvidia-smi > /dev/null || return 0
  local t apps
  for (( t = 0; t <= $1; t++ )); do
    apps=$(nvidia-smi -i 0 --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null)
    [ -z "$apps" ] && return 0
    [ "$t" -lt "$1" ] && sleep 1
  done
  say "GPU 0 still busy after $1 s, timings below are not alone: $(tr '\n' ';' <<<"$apps")"
}

# slowest_build_steps BUILD_DIR OUTFILE: the build's wall span and its 20 slowest steps (seconds, target), from
# BUILD_DIR/.ninja_log (the latest entry per target); tells which translation units hold a device build up. Meant for
# a build from scratch, as on a fresh device machine: ninja's log keeps older builds' entries (their targets too).
slowest_build_steps() {
  [ -f "$1/.ninja_log" ] || { echo "no $1/.ninja_log" > "$2"; return 0; }
  awk -F'\t' '!/^#/ { t[$4] = ($2 - $1) / 1000; if (min == "" || $1 < min) min = $1; if ($2 > max) max = $2 }
    END { printf "span %.1f s over %d steps\n", (max - min) / 1000, length(t); for (k in t) printf "%8.1f  %s\n", t[k], k }' \
    "$1/.ninja_log" | { read -r head; echo "$head"; sort -rn | head -n 20; } > "$2"
}

# build_cupti_trace LIB: bench/profile/kokkos_cupti_trace.cpp built against this machine's CUPTI into LIB (a Kokkos
# profiling library); status 1 where it does not build (LIB.log says why).
build_cupti_trace() {
  local repo cupti
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cupti=$(dirname "$(ls /usr/local/cuda/lib64/libcupti.so /usr/local/cuda/extras/CUPTI/lib64/libcupti.so \
    /usr/local/cuda/targets/*/lib/libcupti.so /usr/local/cuda/lib/libcupti.so 2>/dev/null | head -n1)")
  g++ -O2 -shared -fPIC -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include -o "$1" \
    "$repo/bench/profile/kokkos_cupti_trace.cpp" -L"$cupti" -lcupti -Wl,-rpath,"$cupti" > "$1.log" 2>&1
}

# md_bench_args LOG POT RX RY RZ STEPS WARMUP PRECISION: the arguments of one run of the MD benchmark on one GPU
# (bench/md/in.md_bench on water216 replicated RX x RY x RZ, batmobile/kk with potential POT, newton off, log LOG),
# into the array MD_BENCH_ARGS: the command line that compare_builds.sh and cupti_trace share.
md_bench_args() {
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  MD_BENCH_ARGS=(-k on g 1 -sf kk -pk kokkos newton on neigh half -in "$repo/bench/md/in.md_bench" -log "$1"
    -screen none -var data "$repo/examples/lammps_inputs/water216/water216_start.lmp" -var pot "$2" -var rx "$3"
    -var ry "$4" -var rz "$5" -var nsteps "$6" -var nwarm "$7" -var prec "$8" -var newton off)
}

# cupti_trace LIB LMP TREE PREFIX ATOMS RX RY RZ STEPS LABELS: the GPU's timeline of an MD run (bench/md/in.md_bench,
# TREE's water_fast.pt, precision mixed, newton off, 20 warm-up steps) under the library LIB from build_cupti_trace,
# from the 23rd compute on (two set-ups + 20 warm-up steps + 1): PREFIX.txt (per kernel: launches, mean duration,
# time per step, GPU idle before it), PREFIX.csv (every operation of the last step, in order), PREFIX.log. LABELS 1:
# each operation named by its Kokkos operation and each raw CUDA copy by its host call stack (CUPTI's API records slow
# the host, so only the durations hold).
cupti_trace() {
  md_bench_args "$4.log" "$3/potentials/water_fast.pt" "$6" "$7" "$8" "$9" 20 mixed
  KOKKOS_PROFILE_LIBRARY="$1" BM_TRACE_OUT="$4.txt" BM_TRACE_CSV="$4.csv" BM_TRACE_LABELS="${10}" BM_TRACE_CALLERS="${10}" \
    BM_TRACE_START=bm_kk_atoms:23 timeout 90 "$2" "${MD_BENCH_ARGS[@]}"
}
