// Our own CUDA launch of a Kokkos team-policy kernel: the functor in a constant-memory buffer of its own kernel, two
// slots per kernel used in turn, so that the host waits only for the launch before the previous one of the same kernel,
// and copied there only when it changed.
//
// Why: Kokkos (3.4 and 4.5 alike) launches a functor over 512 B (the fused interaction kernels' is ~1 KB) through one constant-memory
// buffer shared by all kernels, and before each such launch the host waits (cudaEventSynchronize) until the previous
// one -- of any kernel -- has finished: the host cannot queue ahead of the GPU and two such kernels never overlap.
// Its alternatives cost the fused kernels registers (ptxas sm_90, float, L = 2, radial mode 1/2; forward / capped
// receiver adjoint / capped sender adjoint): constant memory 129 regs, 8/8 B, 40-48/48-72 B of spills; the functor as
// a kernel parameter (Kokkos's light-weight hint) or as a __grid_constant__ parameter 153 regs with local arrays
// (1,056-B stack frame), 36/144 B, 52/104 B (MD on the H200 lost 6-7 % with it); through a global-memory
// pointer 137 regs, 24/56 B, 280/392 B. So: constant memory, per kernel.
//
// Public API (namespace batmobile::kernels):
//   const_launch_available               true in CUDA builds (compiled by nvcc), where parallel_for_const_slots
//                                        launches its own kernels
//   parallel_for_const_slots(name, policy, functor)  Kokkos::parallel_for(name, policy, functor) for a Cuda
//       TeamPolicy with an explicit team size, vector length 1 and level-0 scratch only: the same grid, block,
//       dynamic shared memory and "prefer shared" cache preference as Kokkos's launch, on the policy's stream, with
//       the Kokkos Tools hooks (profilers see the name). Anything else goes to Kokkos::parallel_for. Throws on a
//       CUDA error or a functor over kConstSlotBytes.
//       The driver is copied into a slot only where the slot holds another functor or launch shape: the functor is
//       compared byte for byte, so a functor type must have no padding (its padding bytes are indeterminate).
//   const_slot_kernels<Functor, Policy>()  its two kernels (for cudaFuncGetAttributes); {nullptr, nullptr}
//       where it launches none.
//   const_slot_copies()                  driver copies into slots so far (0 where none are launched)
//   default_instance<Exec>()             the default instance of Exec, constructed once: launch the slot kernels on it
//       (or on another instance that lives across launches). Each Kokkos::Cuda() carries a reference-count block of
//       its own, and a policy on a fresh one gives a launch other driver bytes, so its driver would be copied again.
//   parallel_for_constant(name, policy, functor)  Kokkos::parallel_for; on CUDA with Kokkos's heavy-weight hint: the
//       driver through Kokkos's constant buffer whatever Kokkos's size threshold (the fused kernels where
//       parallel_for_const_slots does not take them)
//   parallel_for_queued(name, policy, functor), parallel_reduce_queued(name, policy, functor, result)
//       Kokkos::parallel_for / parallel_reduce; on CUDA with Kokkos's light-weight hint, so that a driver (functor
//       and policy) of 512 B or more travels as a kernel parameter (up to 4 KB) instead of through Kokkos's shared constant buffer, whose
//       launches each wait on the host for the previous one to finish. The model's node, readout and embedding
//       kernels capture its weight table (ModelData, ~450 B) and are over that size: the host stalled at each of
//       them and the GPU could run dry behind it (small MD steps, where launches are not hidden behind kernels).
// Constant memory: 2 x sizeof(ParallelFor driver) per kernel type that is launched this way, beside Kokkos's own
// 32 KB (64 KB per translation unit in all). Relies on Kokkos 4 internals (Impl::ParallelFor's constructor and
// device operator(), its shared-memory layout: sizeof(double) * (team_size + 2) bytes of team reduction space
// before the team scratch), like cuda_cache.hpp.
#pragma once
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <new>
#include <type_traits>
#include <utility>

#include "cuda_cache.hpp"

namespace batmobile {
namespace kernels {

// Each shared object (liblammps with the styles built in, batmobileplugin.so) keeps its own slots, slot kernels and
// their host state: shared (interposed) symbols would let one object's CUDA module register, fill and launch the
// other's, as when the plugin is loaded into an lmp that has the styles built in.
#define BATMOBILE_MODULE_LOCAL __attribute__((visibility("hidden")))

#if defined(KOKKOS_ENABLE_CUDA) && defined(__CUDACC__)
inline constexpr bool const_launch_available = true;
inline constexpr size_t kConstSlotBytes = 4096;
namespace detail {
// driver copies into constant-memory slots so far (all kernels; one host thread launches)
inline long const_slot_copy_count = 0;
// one buffer of two slots per driver type (8-byte words)
template <class Driver>
BATMOBILE_MODULE_LOCAL __constant__ unsigned long long const_slots[2][(sizeof(Driver) + 7) / 8];

template <class Driver, int Slot>
BATMOBILE_MODULE_LOCAL __global__ void const_slot_kernel() {
  reinterpret_cast<const Driver*>(&const_slots<Driver>[Slot][0])->operator()();
}
template <class Driver, int Slot, unsigned MaxThreads, unsigned MinBlocks>
BATMOBILE_MODULE_LOCAL __global__ void __launch_bounds__(MaxThreads, MinBlocks) const_slot_kernel_lb() {
  reinterpret_cast<const Driver*>(&const_slots<Driver>[Slot][0])->operator()();
}
template <class Driver, class LaunchBounds, int Slot>
struct ConstSlotKernel;
template <class Driver, int Slot>
struct ConstSlotKernel<Driver, Kokkos::LaunchBounds<0, 0>, Slot> {
  static auto get() { return &const_slot_kernel<Driver, Slot>; }
};
template <class Driver, unsigned MaxThreads, unsigned MinBlocks, int Slot>
struct ConstSlotKernel<Driver, Kokkos::LaunchBounds<MaxThreads, MinBlocks>, Slot> {
  static auto get() { return &const_slot_kernel_lb<Driver, Slot, MaxThreads, MinBlocks>; }
};

template <class Policy>
struct is_team_policy : std::false_type {};
template <class... Traits>
struct is_team_policy<Kokkos::TeamPolicy<Traits...>> : std::true_type {};
}  // namespace detail

template <class Policy>
constexpr bool const_slots_policy() {
  return std::is_same<typename Policy::execution_space, Kokkos::Cuda>::value && detail::is_team_policy<Policy>::value;
}

inline long const_slot_copies() { return detail::const_slot_copy_count; }

template <class Functor, class Policy>
BATMOBILE_MODULE_LOCAL std::pair<const void*, const void*> const_slot_kernels() {
  if constexpr (const_slots_policy<Policy>()) {
    using Driver = Kokkos::Impl::ParallelFor<Functor, Policy, Kokkos::Cuda>;
    using LB = typename Policy::launch_bounds;
    return {reinterpret_cast<const void*>(detail::ConstSlotKernel<Driver, LB, 0>::get()),
            reinterpret_cast<const void*>(detail::ConstSlotKernel<Driver, LB, 1>::get())};
  }
  return {nullptr, nullptr};
}

template <class Functor, class Policy>
BATMOBILE_MODULE_LOCAL void parallel_for_const_slots(const std::string& name, const Policy& policy,
                                                     const Functor& functor) {
  if constexpr (const_slots_policy<Policy>()) {
    using Driver = Kokkos::Impl::ParallelFor<Functor, Policy, Kokkos::Cuda>;
    using LB = typename Policy::launch_bounds;
    static_assert(sizeof(Driver) <= kConstSlotBytes, "functor too large for a constant-memory slot");
    static_assert(alignof(Driver) <= alignof(unsigned long long), "slots are 8-byte aligned");
    const int team = policy.team_size();
    if (team <= 0 || policy.impl_vector_length() != 1 || policy.scratch_size(1, team) != 0)
      throw std::invalid_argument("batmobile: parallel_for_const_slots needs an explicit team size, vector length 1 "
                                  "and no level-1 scratch (" + name + ")");
    // What a launch's driver depends on besides the functor: the stream it is copied and read on, and the launch
    // shape. The driver's own bytes are not compared: its policy has padding bytes, copied from the caller's.
    struct LaunchKey {
      cudaStream_t stream;
      int league, team, scratch;
      bool operator==(const LaunchKey& o) const {
        return stream == o.stream && league == o.league && team == o.team && scratch == o.scratch;
      }
    };
    // per driver type: the slot to use next, the event after each slot's last kernel, pinned staging per slot
    struct State {
      int next = 0;
      bool held[2] = {false, false};  // staging[slot] holds the driver last copied into the slot
      LaunchKey key[2] = {};          // that driver's launch
      unsigned char functor_bytes[2][sizeof(Functor)] = {};  // and its functor's bytes
      cudaEvent_t done[2];
      unsigned char* staging = nullptr;  // two drivers' bytes, pinned (the copies into the slots read them)
      State() {
        for (auto& e : done) check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "const slots: event");
        check_cuda(cudaMallocHost(reinterpret_cast<void**>(&staging), 2 * sizeof(Driver)), "const slots: staging");
        const auto ks = const_slot_kernels<Functor, Policy>();
        const void* const slot_kernels[2] = {ks.first, ks.second};
        for (const void* k : slot_kernels)
          check_cuda(cudaFuncSetCacheConfig(k, cudaFuncCachePreferShared), "const slots: cache preference");
      }
    };
    static State st;  // (never freed: it lives as long as the CUDA context; one host thread launches, as in LAMMPS)
    uint64_t kpID = 0;
    Policy inner = policy;
    Kokkos::Tools::Impl::begin_parallel_for(inner, functor, name, kpID);
    const int slot = st.next;
    st.next ^= 1;
    const cudaStream_t stream = inner.space().cuda_stream();
    const LaunchKey key{stream, int(inner.league_size()), team, int(inner.scratch_size(0, team))};
    // Where the slot already holds this launch (the same Views and sizes as this kernel's launch before the previous
    // one: most MD steps between re-neighbourings), the kernel reads the slot as it is: a host-to-device copy between
    // two kernels leaves the GPU idle on both sides of it (figures in docs/performance.md).
    const bool reuse = st.held[slot] && st.key[slot] == key &&
                       std::memcmp(static_cast<const void*>(&functor), st.functor_bytes[slot], sizeof(Functor)) == 0;
    if (!reuse) {
      // the kernel that last read this slot (two launches of this kernel ago), and so the copy into it from the
      // staging driver, must be done before either is overwritten
      check_cuda(cudaEventSynchronize(st.done[slot]), "const slots: wait");
      {
        // the driver's Views are untracked copies, as in Kokkos::parallel_for (no reference counts from the launch)
        const auto driver = Kokkos::Impl::construct_with_shared_allocation_tracking_disabled<Driver>(functor, inner);
        // Only its bytes are kept: a live Kokkos 4 driver holds one of the instance's ten team-scratch slots, which
        // its destructor, at the end of this block, gives back. The device code reads no host-side state of it.
        std::memcpy(st.staging + slot * sizeof(Driver), static_cast<const void*>(&driver), sizeof(Driver));
      }
      st.held[slot] = true;
      st.key[slot] = key;
      std::memcpy(st.functor_bytes[slot], static_cast<const void*>(&functor), sizeof(Functor));
      check_cuda(cudaMemcpyToSymbolAsync(detail::const_slots<Driver>, st.staging + slot * sizeof(Driver), sizeof(Driver),
                                         slot * sizeof(detail::const_slots<Driver>[0]), cudaMemcpyHostToDevice,
                                         stream),
                 "const slots: copy of " + name);
      ++detail::const_slot_copy_count;
    }
    const size_t shmem = sizeof(double) * (size_t(team) + 2) + policy.scratch_size(0, team);
    if (policy.league_size() > 0) {
      const dim3 grid(unsigned(policy.league_size()), 1, 1), block(1, unsigned(team), 1);
      if (slot == 0)
        detail::ConstSlotKernel<Driver, LB, 0>::get()<<<grid, block, shmem, stream>>>();
      else
        detail::ConstSlotKernel<Driver, LB, 1>::get()<<<grid, block, shmem, stream>>>();
      check_cuda(cudaGetLastError(), "launching " + name);
    }
    check_cuda(cudaEventRecord(st.done[slot], stream), "const slots: event record");
    Kokkos::Tools::Impl::end_parallel_for(inner, functor, name, kpID);
    return;
  }
  Kokkos::parallel_for(name, policy, functor);
}
#else
inline constexpr bool const_launch_available = false;
inline long const_slot_copies() { return 0; }
template <class Functor, class Policy>
std::pair<const void*, const void*> const_slot_kernels() {
  return {nullptr, nullptr};
}
template <class Functor, class Policy>
void parallel_for_const_slots(const std::string& name, const Policy& policy, const Functor& functor) {
  Kokkos::parallel_for(name, policy, functor);
}
#endif

template <class Exec>
BATMOBILE_MODULE_LOCAL const Exec& default_instance() {
  static const Exec space;
  return space;
}

namespace detail {
template <class Policy>
constexpr bool hint_policy() {
#if defined(KOKKOS_ENABLE_CUDA)
  return std::is_same<typename Policy::execution_space, Kokkos::Cuda>::value;
#else
  return false;
#endif
}
}  // namespace detail

template <class Policy, class Functor>
void parallel_for_queued(const std::string& name, const Policy& policy, const Functor& functor) {
  if constexpr (detail::hint_policy<Policy>())
    Kokkos::parallel_for(name, detail::light_weight(policy), functor);
  else
    Kokkos::parallel_for(name, policy, functor);
}

// Kokkos::parallel_for; on CUDA with Kokkos's heavy-weight hint, so that the driver travels through Kokkos's constant
// buffer whatever Kokkos's size threshold for kernel arguments: as a kernel argument the fused kernels' driver costs
// them registers and stack (docs/performance.md, "Launch mechanics"). blocks_per_sm queries this kernel.
template <class Policy, class Functor>
void parallel_for_constant(const std::string& name, const Policy& policy, const Functor& functor) {
  if constexpr (detail::hint_policy<Policy>())
    Kokkos::parallel_for(name, detail::heavy_weight(policy), functor);
  else
    Kokkos::parallel_for(name, policy, functor);
}

template <class Policy, class Functor, class Result>
void parallel_reduce_queued(const std::string& name, const Policy& policy, const Functor& functor,
                            const Result& result) {
  if constexpr (detail::hint_policy<Policy>())
    Kokkos::parallel_reduce(name, detail::light_weight(policy), functor, result);
  else
    Kokkos::parallel_reduce(name, policy, functor, result);
}

}  // namespace kernels
}  // namespace batmobile
