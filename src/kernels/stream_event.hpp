// A point in the work queued on an execution space's default instance, that the host can wait for without waiting
// for what was queued after it (a CUDA event; host back-ends run their work at once, so there it does nothing).
//
// Public API (namespace batmobile::kernels):
//   PinnedHostSpace<Exec>::type  host memory that Exec's kernels write and its copies read without staging (CUDA:
//                           pinned, CudaHostPinnedSpace; host back-ends: HostSpace)
//   StreamEvent<Exec> ev;   the event is created at the first record() and freed with the object (before
//                           Kokkos::finalize)
//   ev.record()             marks the work queued so far on Exec's default instance
//   ev.wait()               returns once that work has run (at once where nothing was recorded)
// Throws std::runtime_error on a CUDA error.
#pragma once
#include <Kokkos_Core.hpp>

#include <type_traits>

#include "cuda_cache.hpp"

namespace batmobile {
namespace kernels {

template <class Exec>
struct PinnedHostSpace {
  using type = Kokkos::HostSpace;
};
#ifdef KOKKOS_ENABLE_CUDA
template <>
struct PinnedHostSpace<Kokkos::Cuda> {
  using type = Kokkos::CudaHostPinnedSpace;
};
#endif

template <class Exec>
class StreamEvent {
 public:
  StreamEvent() = default;
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  ~StreamEvent() {
#ifdef KOKKOS_ENABLE_CUDA
    if (event_) cudaEventDestroy(event_);
#endif
  }

  void record() {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      if (!event_) check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "stream event: create");
      check_cuda(cudaEventRecord(event_, Exec().cuda_stream()), "stream event: record");
    }
#endif
  }

  void wait() const {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value)
      if (event_) check_cuda(cudaEventSynchronize(event_), "stream event: wait");
#endif
  }

 private:
#ifdef KOKKOS_ENABLE_CUDA
  cudaEvent_t event_ = nullptr;
#endif
};

}  // namespace kernels
}  // namespace batmobile
