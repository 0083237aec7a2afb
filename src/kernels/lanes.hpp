// Two execution-space instances ("lanes") on which independent kernels may run at the same time.
//
// Why: at a few hundred atoms a fused kernel has fewer teams than the GPU has block slots for two waves (648 atoms,
// 132 SMs x 3 blocks of the capped adjoints: 1.6 waves); the receiver and the sender adjoints of a layer are
// independent (they write different outputs), so running them side by side fills the second wave of one with the
// other's teams.
//
// Public API (namespace batmobile::kernels):
//   Lanes<Exec> lanes;     on CUDA two non-blocking streams with Kokkos::Cuda instances on them (created at
//                          construction, destroyed with the object, which must happen before Kokkos::finalize);
//                          on other back-ends both lanes are the default instance (kernels there run in order)
//   lanes.lane(i)          instance i (0 or 1) for execution policies: TeamPolicy<Exec>(lanes.lane(i), n, team)
//   lanes.fork()           both lanes wait for the work issued so far on the default instance
//   lanes.join()           the default instance waits for the work issued so far on both lanes
//   Lanes<Exec>::concurrent  true where the two lanes can overlap (CUDA)
// Dependencies are explicit events (cudaStreamWaitEvent), not the legacy default stream's implicit ordering, so
// that they also hold with per-thread default streams. Throws std::runtime_error on a CUDA error.
// Kernels launched through Kokkos with a functor over 512 B still do not overlap on two lanes: before each such
// launch the host waits for the previous one to finish (cuda_launch.hpp); the fused kernels overlap when launched
// by parallel_for_const_slots (interaction_driver.hpp's launch_fused).
#pragma once
#include <Kokkos_Core.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_cache.hpp"

namespace batmobile {
namespace kernels {

template <class Exec>
class Lanes {
 public:
#ifdef KOKKOS_ENABLE_CUDA
  static constexpr bool concurrent = std::is_same<Exec, Kokkos::Cuda>::value;
#else
  static constexpr bool concurrent = false;
#endif
  Lanes() {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (concurrent) {
      check(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming), "event");
      for (int i = 0; i < 2; ++i) {
        check(cudaStreamCreateWithFlags(&stream_[i], cudaStreamNonBlocking), "stream");
        check(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming), "event");
        lane_[i] = std::make_unique<Exec>(stream_[i]);
      }
      return;
    }
#endif
    for (int i = 0; i < 2; ++i) lane_[i] = std::make_unique<Exec>();
  }
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;
  ~Lanes() {
    for (auto& l : lane_) l.reset();  // the Kokkos instances first: they use the streams
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (concurrent) {
      for (int i = 0; i < 2; ++i) {
        if (stream_[i]) cudaStreamDestroy(stream_[i]);
        if (done_[i]) cudaEventDestroy(done_[i]);
      }
      if (forked_) cudaEventDestroy(forked_);
    }
#endif
  }
  const Exec& lane(int i) const { return *lane_[i]; }
  void fork() {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (concurrent) {
      check(cudaEventRecord(forked_, Exec().cuda_stream()), "fork");
      for (int i = 0; i < 2; ++i) check(cudaStreamWaitEvent(stream_[i], forked_, 0), "fork");
    }
#endif
  }
  void join() {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (concurrent) {
      for (int i = 0; i < 2; ++i) {
        check(cudaEventRecord(done_[i], stream_[i]), "join");
        check(cudaStreamWaitEvent(Exec().cuda_stream(), done_[i], 0), "join");
      }
    }
#endif
  }

 private:
#ifdef KOKKOS_ENABLE_CUDA
  static void check(cudaError_t err, const char* what) {
    check_cuda(err, std::string("concurrent kernel lanes (") + what + ")");
  }
  cudaStream_t stream_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
  cudaEvent_t forked_ = nullptr;
#endif
  std::unique_ptr<Exec> lane_[2];
};

}  // namespace kernels
}  // namespace batmobile
