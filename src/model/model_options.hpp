// Options of batmobile::Model: launch choices and alternative code paths of the edge and node kernels. ModelOptions{}
// is the production configuration; every other accepted value gives the same physics (bit for bit, to rounding or, in
// radial mode 4, to f16 operand precision, as noted per field), so that tests can run each path and a wrong result
// can be narrowed down to one of them.
#pragma once
#include <stdexcept>
#include <string>

#include "kernels/interaction_params.hpp"

namespace batmobile {

// How the fused kernels form the radial MLP's outputs (kernels/interaction_params.hpp).
using RadialMode = kernels::RadialMode;

struct ModelOptions {
  // Fused backend, radial MLP: kPerEdge inside the kernels, edge by edge; kTeamGemm a team GEMM over chunks of
  // edges; kTensorCore (default) that GEMM on tensor cores where they apply (float, sm_80+ CUDA, H a multiple of 8),
  // else kTeamGemm; kTensorCoreF16 (pair style keyword precision mixed) kTensorCore with f16 operands and f32
  // accumulation (float kernels, H a multiple of 16 up to 64; else kTensorCore): the radial outputs to ~1e-3
  // relative.
  RadialMode radial_mode = RadialMode::kTensorCore;
  // Fused backend, radial modes 1, 2 and 4: edges per prepare pass (geometry, basis, hidden layer), 0 (default) the
  // largest that costs no occupancy, else 1..64 (bit-identical for every value).
  int basis_chunk = 0;
  // Fused backend, GPU teams: hidden units per item of the prepare pass, 0 (default) automatic, else a divisor of the
  // model's radial hidden width H (bit-identical for every value; host back-ends always take all H at once).
  int prepare_span = 0;
  // Fused backend, GPU team size of all fused kernels: 0 (default) automatic (fused_team_rule.hpp), else C (one
  // thread per channel) or C x S (S edge slots), at most 1024. Host back-ends run one thread per team regardless.
  int interaction_team = 0;
  // The fused forward kernel's GPU team size alone: -1 (default) as interaction_team, 0 automatic, else as there.
  int forward_team = -1;
  // Threads per team of the node (per-atom) kernels: 0 (default) automatic (1 on host back-ends, 128 on GPUs), else
  // 1..1024 (bit-identical).
  int node_team = 0;
  // Atoms per team of the node kernels (each weight read once for all of them): 1..4, default 4, 0 automatic
  // (auto_node_atoms, model.hpp); results agree to rounding (the RMS sums' order differs).
  int node_atoms = 4;
  // Reference backend: the per-edge radial-MLP outputs are kept from the forward pass for the adjoint when they take
  // at most this many MiB (default 1024), else recomputed; 0 never keeps them (agrees to rounding).
  int radial_cache_mb = 1024;
  // Fused backend: the sender adjoint runs one team per local atom and its periodic images where the ghost exchange
  // names them (one rank; ghost rows of the results stay zero); false: one team per atom incl. ghosts, the path of
  // several ranks (agrees to rounding: the images' terms are summed in another order).
  bool group_senders = true;
};

// Throws std::invalid_argument naming the first field out of range; radial_hidden: the model's H.
inline void validate_options(const ModelOptions& o, int radial_hidden) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("batmobile::ModelOptions::" + what); };
  if (!kernels::valid_radial_mode(o.radial_mode)) fail("radial_mode must be 0, 1, 2 or 4");
  if (o.basis_chunk < 0 || o.basis_chunk > 64) fail("basis_chunk must be an integer 0..64");
  if (o.prepare_span < 0 || (o.prepare_span > 0 && radial_hidden % o.prepare_span != 0))
    fail("prepare_span must be 0 (automatic) or a divisor of the model's radial hidden width H = " +
         std::to_string(radial_hidden));
  if (o.interaction_team < 0 || o.interaction_team > 1024)
    fail("interaction_team must be 0 (automatic) or a team size C x S of at most 1024");
  if (o.forward_team < -1 || o.forward_team > 1024)
    fail("forward_team must be -1 (as interaction_team), 0 (automatic) or a team size C x S of at most 1024");
  if (o.node_team < 0 || o.node_team > 1024) fail("node_team must be 0 (automatic) or a team size 1..1024");
  if (o.node_atoms < 0 || o.node_atoms > 4) fail("node_atoms must be 0 (automatic), 1, 2, 3 or 4");
  if (o.radial_cache_mb < 0) fail("radial_cache_mb must be a number of MiB >= 0");
}

// The fields that differ from ModelOptions{}, as "name value, name value" (empty where all are the defaults).
inline std::string non_default_options(const ModelOptions& o) {
  const ModelOptions d;
  std::string s;
  auto add = [&](const char* name, auto value, auto standard) {
    if (value == standard) return;
    if (!s.empty()) s += ", ";
    s += std::string(name) + " " + std::to_string(value);
  };
  add("radial_mode", int(o.radial_mode), int(d.radial_mode));
  add("basis_chunk", o.basis_chunk, d.basis_chunk);
  add("prepare_span", o.prepare_span, d.prepare_span);
  add("interaction_team", o.interaction_team, d.interaction_team);
  add("forward_team", o.forward_team, d.forward_team);
  add("node_team", o.node_team, d.node_team);
  add("node_atoms", o.node_atoms, d.node_atoms);
  add("radial_cache_mb", o.radial_cache_mb, d.radial_cache_mb);
  add("group_senders", int(o.group_senders), int(d.group_senders));
  return s;
}

}  // namespace batmobile
