// A few doubles from device memory to the host without making the host wait for the GPU at the copy.
//
// Why: a value the host needs from the GPU every MD step (the pair style's closest-distance check) made the host
// wait there for all queued work, and the GPU then idled while the host queued the rest of the step one launch at a
// time. Checking the value one step later, or at a point where the host waits anyway, costs nothing; kernels that
// write the values straight into the pinned buffer (target(), mark()) spare the GPU the copy and its idle time.
//
// Public API (namespace batmobile::kernels):
//   AsyncReadback<Exec, N> rb;  on CUDA a pinned host buffer and an event (stream_event.hpp), created at first use and
//                               freed with the object, which must happen before Kokkos::finalize; elsewhere an array
//   rb.start(src)               queues the copy of src(0..N-1) (device memory of Exec) on Exec's default instance and
//                               records an event after it; on host back-ends it copies at once
//   rb.target()                 the N values as a View that Exec's kernels write directly (a reduction's result, a
//                               scan's total): on CUDA the pinned buffer itself, so that no copy is queued at all
//   rb.mark()                   after the kernels that write target(): records the event (as start() does after its
//                               copy)
//   rb.pending()                true from start() until take()
//   rb.values()                 waits until the copy has landed (at once where the GPU is past it) and returns the N
//                               values (pending stays set)
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

  template <class View>
  void start(const View& src) {
    static_assert(std::is_same<typename View::value_type, double>::value, "AsyncReadback copies doubles");
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) {
      allocate();
      const cudaStream_t stream = Exec().cuda_stream();
      check_cuda(cudaMemcpyAsync(pinned_, src.data(), N * sizeof(double), cudaMemcpyDeviceToHost, stream),
                 "readback: copy");
      event_.record();
      pending_ = true;
      return;
    }
#endif
    Kokkos::deep_copy(Kokkos::View<double[N], Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host_.data()),
                      Kokkos::View<const double[N], typename View::memory_space,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>(src.data()));
    pending_ = true;
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
