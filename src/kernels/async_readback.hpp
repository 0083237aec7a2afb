// A few doubles that the GPU's kernels write for the host, read without making the host wait for the GPU there.
//
// Why: a value the host needs from the GPU every MD step (the pair style's closest-distance check) made the host
// wait there for all queued work, and the GPU then idled while the host queued the rest of the step one launch at a
// time. Checking the value one step later, or at a point where the host waits anyway, costs nothing; kernels that
// write the values straight into pinned host memory spare the GPU a copy and its idle time.
//
// Public API (namespace batmobile::kernels):
//   AsyncReadback<Exec, N> rb;  a buffer in PinnedHostSpace<Exec> (pinned host memory on CUDA) and an event
//                               (stream_event.hpp), created at first use and freed with the object, which must
//                               happen before Kokkos::finalize
//   rb.target()                 the N values as a View that Exec's kernels write directly (a reduction's result, a
//                               scan's total): on CUDA the pinned buffer itself, so that no copy is queued at all
//   rb.mark()                   after the kernels that write target(): records an event after them
//   rb.pending()                true from mark() until take()
//   rb.values()                 waits until those kernels have run (at once where the GPU is past them) and returns
//                               the N values (pending stays set; zeros before the first target())
//   rb.take()                   values(), and clears pending
// Throws std::runtime_error on a CUDA error.
#pragma once
#include <Kokkos_Core.hpp>

#include <array>

#include "stream_event.hpp"

namespace batmobile {
namespace kernels {

template <class Exec, int N>
class AsyncReadback {
 public:
  using TargetView = Kokkos::View<double[N], typename PinnedHostSpace<Exec>::type>;
  static_assert(Kokkos::SpaceAccessibility<Exec, typename TargetView::memory_space>::accessible,
                "AsyncReadback: the back-end's kernels cannot write the host buffer");

  TargetView target() {
    if (!buffer_.data()) buffer_ = TargetView("bm_readback");
    return buffer_;
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
    event_.wait();
    std::array<double, N> v{};
    if (buffer_.data())
      for (int i = 0; i < N; ++i) v[i] = buffer_(i);
    return v;
  }

 private:
  TargetView buffer_;
  StreamEvent<Exec> event_;  // (also makes the object non-copyable)
  bool pending_ = false;
};

}  // namespace kernels
}  // namespace batmobile
