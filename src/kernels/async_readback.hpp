// A few doubles that the GPU's kernels write for the host, read without making the host wait for the GPU there.
//
// Why: a value the host needs from the GPU every MD step (the pair style's closest-distance check) made the host
// wait there for all queued work, and the GPU then idled while the host queued the rest of the step one launch at a
// time. Checking the value one step later, or at a point where the host waits anyway, costs nothing; kernels that
// write the values straight into pinned host memory spare the GPU a copy and its idle time.
//
// Public API (namespace batmobile::kernels):
//   AsyncReadback<Exec, N> rb;  on CUDA a pinned host buffer and an event (stream_event.hpp), created at first use and
//                               freed with the object, which must happen before Kokkos::finalize; elsewhere an array
//   rb.target()                 the N values as a View that Exec's kernels write directly (a reduction's result, a
//                               scan's total): on CUDA the pinned buffer itself, so that no copy is queued at all
//   rb.mark()                   after the kernels that write target(): records an event after them
//   rb.pending()                true from mark() until take()
//   rb.values()                 waits until those kernels have run (at once where the GPU is past them) and returns
//                               the N values (pending stays set)
//   rb.take()                   values(), and clears pending
// Throws std::runtime_error on a CUDA error.
#pragma once
#include <Kokkos_Core.hpp>

#include <array>
#include <type_traits>

#include "cuda_cache.hpp"
#include "stream_event.hpp"

namespace batmobile {
namespace kernels {

template <class Exec, int N>
class AsyncReadback {
 public:
  using TargetView = Kokkos::View<double[N], typename PinnedHostSpace<Exec>::type, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  static_assert(Kokkos::SpaceAccessibility<Exec, typename PinnedHostSpace<Exec>::type>::accessible,
                "AsyncReadback: the back-end's kernels cannot write the host buffer");

  AsyncReadback() = default;
  AsyncReadback(const AsyncReadback&) = delete;
  AsyncReadback& operator=(const AsyncReadback&) = delete;
  ~AsyncReadback() {
#ifdef KOKKOS_ENABLE_CUDA
    if (pinned_) cudaFreeHost(pinned_);
#endif
  }

  TargetView target() {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      allocate();
      return TargetView(pinned_);
    }
#endif
    return TargetView(host_.data());
  }

  void mark() {
    event_.record();
    pending_ = true;
  }

  bool pending() const { return pending_; }

  std::array<double, N> take() {
    pending_ = false;
    return values();
  }

  std::array<double, N> values() const {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      event_.wait();
      std::array<double, N> v;
      for (int i = 0; i < N; ++i) v[i] = pinned_[i];
      return v;
    }
#endif
    return host_;
  }

 private:
#ifdef KOKKOS_ENABLE_CUDA
  void allocate() {
    if (pinned_) return;
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&pinned_), N * sizeof(double)), "readback: pinned buffer");
  }
#endif
  StreamEvent<Exec> event_;
  bool pending_ = false;
  std::array<double, N> host_{};
#ifdef KOKKOS_ENABLE_CUDA
  double* pinned_ = nullptr;
#endif
};

}  // namespace kernels
}  // namespace batmobile
