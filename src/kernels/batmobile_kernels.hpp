// Umbrella header of the Batmobile kernel library (header-only, C++17, Kokkos 4.5, namespace
// batmobile::kernels). See each header's top comment for its API and view layouts:
//   common.hpp        path sets, alpha_p, envelope, Bessel, dual numbers, static_for
//   sh.hpp            real spherical harmonics l <= 3 (e3nn 0.6, component normalisation, polar axis y) + adjoint
//   generated/cg_tables.hpp  real CG tables (python/tools/gen_cg.py) + straight-line per-path kernels
//   tp.hpp            per-channel tensor products over a path set + adjoints
//   graph.hpp         receiver- and sender-grouped CSR neighbour graph
//   interaction.hpp   fused conv + on-the-fly attention of one layer (docs/model.md steps 1-2) + adjoint
//   eaas.hpp          Wigner-D to the edge frame, aligned-frame gather tables, SO(2) tensor product + adjoint
//   tensor_core.hpp   TF32 tensor-core MMA (sm_80+), 3xTF32 split, fragment packing (radial mode 2)
//   cuda_cache.hpp    blocks per SM of a Kokkos kernel on CUDA, check_cuda
#pragma once
#include "common.hpp"
#include "cuda_cache.hpp"
#include "eaas.hpp"
#include "graph.hpp"
#include "interaction.hpp"
#include "sh.hpp"
#include "tensor_core.hpp"
#include "tp.hpp"
