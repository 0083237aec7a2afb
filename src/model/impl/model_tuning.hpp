// Internal tuning of batmobile::Model (not part of its API: no pair_style keyword sets it): launch choices and
// alternative code paths of the edge and node kernels. ModelTuning{} is the production configuration, which
// Model's public constructor uses; every other accepted value gives the same physics (bit for bit or to rounding,
// as noted per field), so that tests can run each path (Model's constructor with a ModelTuning) and a wrong result
// can be narrowed down to one of them.
#pragma once
#include <stdexcept>
#include <string>

namespace batmobile {
namespace impl {

struct ModelTuning {
  // Fused backend, radial modes other than kPerEdge: edges per prepare pass (geometry, basis, hidden layer), 0
  // (default) the largest that costs no occupancy, else 1..64 (bit-identical for every value).
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
inline void validate_tuning(const ModelTuning& t, int radial_hidden) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("batmobile::ModelTuning::" + what); };
  if (t.basis_chunk < 0 || t.basis_chunk > 64) fail("basis_chunk must be an integer 0..64");
  if (t.prepare_span < 0 || (t.prepare_span > 0 && radial_hidden % t.prepare_span != 0))
    fail("prepare_span must be 0 (automatic) or a divisor of the model's radial hidden width H = " +
         std::to_string(radial_hidden));
  if (t.interaction_team < 0 || t.interaction_team > 1024)
    fail("interaction_team must be 0 (automatic) or a team size C x S of at most 1024");
  if (t.forward_team < -1 || t.forward_team > 1024)
    fail("forward_team must be -1 (as interaction_team), 0 (automatic) or a team size C x S of at most 1024");
  if (t.node_team < 0 || t.node_team > 1024) fail("node_team must be 0 (automatic) or a team size 1..1024");
  if (t.node_atoms < 0 || t.node_atoms > 4) fail("node_atoms must be 0 (automatic), 1, 2, 3 or 4");
  if (t.radial_cache_mb < 0) fail("radial_cache_mb must be a number of MiB >= 0");
}

// The fields that differ from ModelTuning{}, as "name value, name value" (empty where all are the defaults).
inline std::string non_default_tuning(const ModelTuning& t) {
  const ModelTuning d;
  std::string s;
  auto add = [&](const char* name, auto value, auto standard) {
    if (value == standard) return;
    if (!s.empty()) s += ", ";
    s += std::string(name) + " " + std::to_string(value);
  };
  add("basis_chunk", t.basis_chunk, d.basis_chunk);
  add("prepare_span", t.prepare_span, d.prepare_span);
  add("interaction_team", t.interaction_team, d.interaction_team);
  add("forward_team", t.forward_team, d.forward_team);
  add("node_team", t.node_team, d.node_team);
  add("node_atoms", t.node_atoms, d.node_atoms);
  add("radial_cache_mb", t.radial_cache_mb, d.radial_cache_mb);
  add("group_senders", int(t.group_senders), int(d.group_senders));
  return s;
}

}  // namespace impl
}  // namespace batmobile
