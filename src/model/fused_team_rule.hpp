#pragma once
// Automatic GPU team size of the fused interaction kernels as a function of the local atom count (host-side launch
// policy, pure so that tests check it anywhere; the kernels' own occupancy rules live in kernels::atom_team_policy).
#include "kernels/interaction.hpp"

namespace batmobile::model_detail {

// From this many local atoms on, the fused kernels' GPU teams get half the automatic edge split (C = 32: 64
// threads instead of 128). H200, water, fp32 (2026-11-29): 10,368 atoms 20.6 -> 24.2 steps/s with 64 threads,
// 648 atoms 210 -> 206 (few atoms fill the GPU only with the wider split).
constexpr int kManyAtoms = 2048;

// Below this many local atoms, where the rule applies (few_atoms_rule_on: by default the fp32 kernels), all fused
// kernels (forward and both adjoints) take one edge slot less than the automatic split (kernels::kOneSlotLessTeam;
// C = 32: teams of 96 instead of 128, as BATMOBILE_INTERACTION_TEAM=96; the adjoints' occupancy model in
// wave_aware_split keeps 128 there, the two adjoints running side by side). H200,
// water, fp32, one tree (3d019f0), alternating runs in three calls (bench/results/raw/md_h200_session19_ab.json)
// with BATMOBILE_INTERACTION_TEAM=96 standing for the rule: 648 atoms 1015.7 vs 993.3 steps/s mean (24 and 27 runs);
// but 1,296 atoms 630.0 vs 656.7 and 10,368 109.1 vs 125.1 (12 each), so the crossover lies between 648 and 1,296
// (not located). BATMOBILE_FEW_ATOMS_TEAM=0 turns the rule off (A/B runs).
constexpr int kFewAtoms = 1000;

// Whether the kFewAtoms rule applies: BATMOBILE_FEW_ATOMS_TEAM as `setting` (-1 unset, 0 off, 1 on); unset, the fp32
// kernels only. It was tuned in fp32; in fp64 it costs time. H200, water, 648 atoms, one tree (2f810f3), alternating
// runs of one call (bench/results/raw/md_h200_session21_ab.json): fp64 447.5 with the rule vs 476.5 steps/s without
// (11 and 10 runs, every pair the same way: the fp64 launch without it is forward 64 / 96, adjoints 128), fp32 1016.2
// vs 993.8 (24 and 23 runs).
inline bool few_atoms_rule_on(int setting, bool fp32_kernels) { return setting < 0 ? fp32_kernels : setting == 1; }

// Team size for nl local atoms and C channels; `forward`: the forward kernel's. wave_teams as
// FusedState::wave_teams (0 none, 1 the forward's, 2 also the adjoints'); few_atoms_team: the kFewAtoms rule.
// Returns an explicit team size C * S, 0 (automatic), kernels::kWaveAwareTeam or kernels::kOneSlotLessTeam (the
// automatic split less one slot, as the kernels choose it: never more scratch than the automatic launch).
inline int automatic_fused_team(int nl, int C, bool forward, int wave_teams, bool few_atoms_team) {
  if (nl < kManyAtoms) {
    if (few_atoms_team && nl < kFewAtoms) return kernels::kOneSlotLessTeam;
    return wave_teams == 2 || (forward && wave_teams == 1) ? kernels::kWaveAwareTeam : 0;
  }
  const int S = kernels::auto_edge_split(C);
  return S >= 2 ? C * (S / 2) : 0;
}

}  // namespace batmobile::model_detail
