#pragma once
// Automatic GPU team size of the fused interaction kernels as a function of the local atom count (host-side launch
// policy, pure so that tests check it anywhere; the kernels' own occupancy rules live in kernels::atom_team_policy).
#include <type_traits>

#include "kernels/interaction.hpp"

namespace batmobile::model_detail {

// From this many local atoms on, the fused kernels' GPU teams get half the automatic edge split (C = 32: 64
// threads instead of 128): many atoms fill the GPU with narrower teams, few only with the wider split.
constexpr int kManyAtoms = 2048;

// Below this many local atoms, where the rule applies (few_atoms_rule_for), all fused kernels (forward and
// adjoints) take one edge slot less than the automatic split (kernels::kOneSlotLessTeam; C = 32: teams of 96 instead
// of 128). Measured faster at 648 atoms and slower at 1,296 on the H200: the crossover lies between them.
constexpr int kFewAtoms = 1000;

// Whether the kFewAtoms rule applies to kernels in precision T: fp32 only (tuned there; in fp64 it cost time).
template <class T>
constexpr bool few_atoms_rule_for = std::is_same<T, float>::value;

// Team size for nl local atoms and C channels; `forward`: the forward kernel's, which below kManyAtoms lowers its
// automatic split where fewer waves of blocks finish sooner (kernels::kWaveAwareTeam; the adjoint keeps the automatic
// split, chosen when its two passes ran side by side and filled each other's last wave: docs/performance.md, "Launch
// of the fused kernels"); few_atoms_rule: the kFewAtoms rule. Returns an explicit team size C * S, 0
// (automatic), kernels::kWaveAwareTeam or kernels::kOneSlotLessTeam (the automatic split less one slot, as the
// kernels choose it: never more scratch than the automatic launch).
inline int automatic_fused_team(int nl, int C, bool forward, bool few_atoms_rule) {
  if (nl < kManyAtoms) {
    if (few_atoms_rule && nl < kFewAtoms) return kernels::kOneSlotLessTeam;
    return forward ? kernels::kWaveAwareTeam : 0;
  }
  const int slots = kernels::auto_edge_split(C);
  return slots >= 2 ? C * (slots / 2) : 0;
}

}  // namespace batmobile::model_detail
