// Interaction.ForwardAndAdjoint*: the fused kernels (L = 1-3, wide keys, many neighbours) vs the independent double
// reference and finite differences of every adjoint output (interaction_test_util.hpp holds the shared helpers).
#include "interaction_test_util.hpp"

using namespace bt;
using namespace interaction_test;

// The float L = 3 kernel set of all test_interaction sources (interaction_test_util.hpp).
namespace interaction_test {
INTERACTION_TEST_RUN_KERNELS(float, 3);
}  // namespace interaction_test

TEST(Interaction, ForwardAndAdjointL1) { check_forward_and_adjoint<1>(11); }
TEST(Interaction, ForwardAndAdjointL2) { check_forward_and_adjoint<2>(12); }
TEST(Interaction, ForwardAndAdjointL3) { check_forward_and_adjoint<3>(13); }
// dk > kSmallDk: the adjoint kernels with the wide dq/dk partials (the other tests have dk = 3)
TEST(Interaction, ForwardAndAdjointWideKeys) { check_forward_and_adjoint<2>(19, 6, 10, 4.0, {0}, 12); }
// ~40 neighbours per receiver: several team-shared edge chunks per atom (chunk boundaries, softmax carry-over).
TEST(Interaction, ForwardAndAdjointManyNeighbours) { check_forward_and_adjoint<1>(14, 4, 44, 3.0); }
