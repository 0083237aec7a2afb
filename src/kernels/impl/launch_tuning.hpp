// Test-only launch switches of the fused interaction kernels (not part of the kernel API; production never changes
// them). The production launch is LaunchTuning{}: register caps on where they are compiled (fused_cap_blocks,
// interaction_launch.hpp) and, on CUDA, the fused kernels launched from constant-memory slots of their own
// (parallel_for_const_slots, cuda_launch.hpp). The kernel tests switch them off to check that the alternative launch
// gives the same results (a cap changes registers, not arithmetic; the slots launch the same code as Kokkos's).
//
//   impl::launch_tuning()            the switches in effect, read by the drivers at each launch
//   impl::ScopedLaunchTuning guard(t)  sets them to t until the guard's scope ends (tests; not thread-safe: the
//                                      drivers of other threads would see them too)
#pragma once

namespace batmobile {
namespace kernels {
namespace impl {

struct LaunchTuning {
  // The forward kernel launched with Kokkos::LaunchBounds<128, 4> where compiled (fused_cap_blocks) and teams have
  // <= 128 threads: at most 128 registers, so that 4 blocks of 128 threads fit on an SM instead of 3 (uncapped it
  // takes a register or two more; capped it does not spill). false: uncapped.
  bool cap_forward = true;
  // The adjoint kernels launched with their register cap (LaunchBounds<128, 3>; first and last layer roles
  // <128, 4>) where compiled and teams have <= 128 threads: the extra block per SM made them faster on the H200.
  // false: uncapped.
  bool cap_adjoints = true;
  // CUDA: the capped fused kernels launched by parallel_for_const_slots (their functor in a constant-memory buffer of
  // their own, so that the host no longer waits for the previous kernel before each launch, as Kokkos's launch makes
  // it: this is what lets the two adjoints overlap on their lanes, lanes.hpp). false: through Kokkos's own launch
  // (the same code; basis_chunk = 0's occupancy guard reads the registers of Kokkos's kernels, which ptxas gives
  // these too).
  bool const_slot_launch = true;
};

// (A function-local static: one object for the whole program, constant-initialised, so reading it costs no guard.)
inline LaunchTuning& launch_tuning() {
  static LaunchTuning tuning;
  return tuning;
}

class ScopedLaunchTuning {
 public:
  explicit ScopedLaunchTuning(const LaunchTuning& t) : saved_(launch_tuning()) { launch_tuning() = t; }
  ~ScopedLaunchTuning() { launch_tuning() = saved_; }
  ScopedLaunchTuning(const ScopedLaunchTuning&) = delete;
  ScopedLaunchTuning& operator=(const ScopedLaunchTuning&) = delete;

 private:
  LaunchTuning saved_;
};

}  // namespace impl
}  // namespace kernels
}  // namespace batmobile
