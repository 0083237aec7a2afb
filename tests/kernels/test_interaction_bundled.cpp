// The fused kernels with the bundled potentials' dimensions compiled in (BundledDims) in float, for run_kernels<float,
// kBundledL> (test_interaction_launch.cpp): a source of their own for CUDA's constant-memory limit per source
// (interaction_test_util.hpp). The tests that run them are in test_interaction_paths.cpp.
#include "interaction_test_util.hpp"

namespace interaction_test {
INTERACTION_TEST_FUSED(, float, kBundledL, BundledDims);
}  // namespace interaction_test
