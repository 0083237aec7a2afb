#!/usr/bin/env bash
# Kokkos 5 readiness check (host back-end, for CI). Kokkos 5 requires C++20 and drops what Kokkos 4 keeps only under
# KOKKOS_ENABLE_DEPRECATED_CODE_4; Kokkos 4.6.01 (the last Kokkos 4) built as C++20 with that option off is the
# nearest thing to compile against, so code that passes here should need no source change for Kokkos 5's removals.
# Compile-only (nothing runs). One line per stage; at the first failure an `error:` line and a non-zero exit.
#   1. kokkos:      Kokkos 4.6.01 host install (scripts/build_kokkos_host.sh --next; cached; ~45 s once)
#   2. names:       grep of src/ for Kokkos names that Kokkos 5 drops (also covers the CUDA-only code, e.g.
#                   cuda_launch.hpp, which the host compiles below skip; scripts/cuda_compile_check.sh --next
#                   compiles the KOKKOS pair style for CUDA against Kokkos 4.6.01)
#   3. pair styles: pair_batmobile.cpp and pair_batmobile_kokkos.cpp, -fsyntax-only, C++20, against the LAMMPS
#                   4 Feb 2025 sources (src, src/KOKKOS; they need no generated style headers) (~15 s). LAMMPS 2025's
#                   memory_kokkos.h reads DualView::h_view, which is private without deprecated code (LAMMPS 4 Jul
#                   2026 reads view_host()): the check compiles against a copy with that one change.
#   4. build:       the stand-alone project as C++20 (build/kokkos-next): the model library, the model tests and the
#                   kernel tests but test_interaction, which compile every header of src/kernels and src/model (~8 min
#                   on one busy core: model library 6.2, model tests 0.6, kernel tests 1.1); with --full also
#                   test_interaction (~7 min more on one core: the same kernels in more configurations).
# Parallelism: BATMOBILE_JOBS (default: all cores).
#   scripts/check_kokkos_next.sh [--full]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
cd "$BATMOBILE_REPO"
FULL=0
case "${1:-}" in --full) FULL=1;; "") ;; *) echo "error: unknown option $1 (usage: $0 [--full])" >&2; exit 2;; esac
B=build/kokkos-next
mkdir -p "$B"
T0=$SECONDS
fail() { echo "error: $*" >&2; exit 1; }
stage() { echo "[kokkos-next +$((SECONDS - T0))s] $*"; }

# 1. Kokkos 4.6.01, C++20, deprecated code off
"$HERE/build_kokkos_host.sh" --next > "$B/kokkos.log" 2>&1 \
  || { tail -n 20 "$B/kokkos.log" >&2; fail "Kokkos $KOKKOS_NEXT_TAG install failed ($B/kokkos.log)"; }
KP=$(tail -n1 "$B/kokkos.log")
grep -q "^#define KOKKOS_ENABLE_DEPRECATED_CODE_4" "$KP/include/KokkosCore_config.h" && fail "$KP has deprecated code on"
stage "kokkos: $KOKKOS_NEXT_TAG, C++20, no deprecated code: ok ($KP)"

# 2. names that Kokkos 5 no longer has: removed under KOKKOS_ENABLE_DEPRECATED_CODE_4 in 4.6.01 (atomics, Impl::ALL_t,
# static concurrency()/in_parallel(), View::Rank, Kokkos::vector, StaticCrsGraph, tasking, ...), or earlier (the
# Kokkos::Experimental math functions, InitArguments)
DROPPED='Kokkos::Experimental::(sqrt|cbrt|exp|exp2|expm1|log|log2|log10|log1p|pow|hypot|sin|cos|tan|asin|acos|atan'
DROPPED+='|atan2|sinh|cosh|tanh|erf|erfc|tgamma|lgamma|fabs|abs|fmin|fmax|fmod|floor|ceil|round|trunc|isnan|isinf'
DROPPED+='|isfinite|signbit|copysign|min|max|clamp|infinity|epsilon|finite_min|finite_max)\b'
DROPPED+='|\batomic_(increment|decrement|assign|compare_exchange_strong)\b|Impl::ALL_t\b|\bInitArguments\b'
DROPPED+='|::in_parallel\(|::is_asynchronous\(|::concurrency\(\)|\bdevice_arch\(\)|CudaUVMSpace::available'
DROPPED+='|Kokkos::vector\b|Kokkos_Vector\.hpp|StaticCrsGraph|TaskScheduler|BasicFuture|\bKOKKOS_ENABLE_TASKDAG\b'
DROPPED+='|is_layouttiled|layout_iterate_type_selector|set_(num_devices|skip_device)\(|KOKKOS_ENABLE_CUDA_LDG_INTRINSIC'
DROPPED+='|atomic_query_version|::Rank\b|Kokkos::pair<[^<>]*,\s*void>|\bKOKKOS_DEPRECATED'
if hits=$(grep -rnE "$DROPPED" src); then
  echo "$hits" >&2; fail "src/ uses Kokkos names that Kokkos 5 drops (above)"
fi
stage "names: ok (no Kokkos name that Kokkos 5 drops in src/)"

# 3. the pair styles against LAMMPS 2025's sources and Kokkos 4.6.01
"$HERE/fetch_sources.sh" lammps-2025 > "$B/lammps_sources.log" 2>&1 \
  || { tail -n 20 "$B/lammps_sources.log" >&2; fail "no LAMMPS $LAMMPS2025_TAG sources ($B/lammps_sources.log)"; }
LT=$(lammps_src 2025)
OV=$B/lammps-overlay; mkdir -p "$OV"   # memory_kokkos.h with view_host() for h_view (see the header comment)
sed -E 's/\.h_view\b/.view_host()/g' "$LT/src/KOKKOS/memory_kokkos.h" > "$OV/memory_kokkos.h"
for f in pair_batmobile.cpp pair_batmobile_kokkos.cpp; do
  g++ -std=c++20 -fsyntax-only -fopenmp -DLMP_KOKKOS -DBATMOBILE_LAMMPS_VERSION=$LAMMPS2025_TAG -DBATMOBILE_WITH_TORCH=1 \
    -DLAMMPS_SMALLBIG -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -Isrc/pair_batmobile -Isrc -I"$OV" -I"$LT/src" \
    -I"$LT/src/KOKKOS" -isystem "$KP/include" -isystem /usr/lib/x86_64-linux-gnu/openmpi/include \
    -isystem /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi "src/pair_batmobile/$f" > "$B/$f.log" 2>&1 \
    || { grep -m10 -A4 "error" "$B/$f.log" >&2; fail "$f: C++20 against LAMMPS $LAMMPS2025_TAG + Kokkos $KOKKOS_NEXT_TAG failed ($B/$f.log)"; }
done
stage "pair styles: pair_batmobile.cpp, pair_batmobile_kokkos.cpp (C++20, LAMMPS $LAMMPS2025_TAG sources): ok"

# 4. the stand-alone project as C++20
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 -DKokkos_DIR="$KP/lib/cmake/Kokkos" \
  -DBATMOBILE_BUILD_BENCH=OFF -DBATMOBILE_BUILD_TESTS=ON > "$B/configure.log" 2>&1 \
  || { tail -n 20 "$B/configure.log" >&2; fail "configure against Kokkos $KOKKOS_NEXT_TAG failed ($B/configure.log)"; }
grep -q "^CMAKE_CXX_STANDARD:[A-Z]*=20$" "$B/CMakeCache.txt" || fail "$B is not configured as C++20"
TARGETS=(batmobile_model test_model test_candidate_graph test_committee_deviation test_sh_cg test_conv_weights test_eaas
         test_async_readback)
[ $FULL = 1 ] && TARGETS+=(test_interaction)
t0=$SECONDS
ninja -C "$B" -j "$(build_jobs)" "${TARGETS[@]}" > "$B/build.log" 2>&1 \
  || { grep -m10 -B2 -A6 "error" "$B/build.log" >&2; fail "C++20 build against Kokkos $KOKKOS_NEXT_TAG failed ($B/build.log)"; }
stage "build: ${TARGETS[*]} (C++20): ok ($((SECONDS - t0)) s)"
