// Options of batmobile::Model that a user chooses: how the fused kernels form the radial MLP's outputs, which the
// pair styles' `precision` keyword sets (mixed: RadialMode::kTensorCoreF16). The backend (fused or reference kernels,
// keyword `kernels`) and the precision of the kernels (the model's scalar type) are Model's other choices. The
// tuning of the kernels' launches, which no keyword sets, is internal: impl::ModelTuning (impl/model_tuning.hpp).
// ModelOptions{} is the production configuration.
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
  // relative. The other modes give the same physics to rounding (tests run each).
  RadialMode radial_mode = RadialMode::kTensorCore;
};

// Throws std::invalid_argument naming the first field out of range.
inline void validate_options(const ModelOptions& o) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("batmobile::ModelOptions::" + what); };
  if (!kernels::valid_radial_mode(o.radial_mode)) fail("radial_mode must be 0, 1, 2 or 4");
}

// The fields that differ from ModelOptions{}, as "name value, name value" (empty where all are the defaults).
inline std::string non_default_options(const ModelOptions& o) {
  const ModelOptions d;
  std::string s;
  if (o.radial_mode != d.radial_mode) s += "radial_mode " + std::to_string(int(o.radial_mode));
  return s;
}

}  // namespace batmobile
