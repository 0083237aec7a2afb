// How many blocks of a Kokkos kernel fit on a CUDA SM, and the CUDA error check the kernels share.
//
// The fused kernels launched by cuda_launch.hpp take cudaFuncCachePreferShared: on the H200 that is 233 KB of shared
// memory and ~23 KB of L1 per SM whatever the kernel's scratch needs (Nsight Compute; other carveouts measured no
// faster: docs/performance.md). Kokkos 4 gives the kernels it launches a carveout sized for the blocks that their
// registers allow, which holds as many blocks as counted here.
//
// Public API (namespace batmobile::kernels):
//   check_cuda(err, what)                           throws "batmobile: WHAT: <CUDA error>" unless cudaSuccess (CUDA)
//   blocks_per_sm<Functor, Policy>(team_size, scratch_bytes)  blocks of that kernel that fit on one SM with that
//       much team scratch, by registers (its numRegs, allocated per warp in units of 256), threads, blocks and
//       shared memory (the SM's whole shared capacity, as after "prefer shared"; Kokkos adds
//       8 (team_size + 2) bytes per block, CUDA reserves reservedSharedMemPerBlock); -1 off CUDA. Not the CUDA
//       occupancy calculator: before a kernel's first launch that one assumes the default carveout (on the H200
//       it picked 40/44-edge basis chunks for teams of 128 where 3 blocks of ~38 KB fit after the launch).
//       Throws on a CUDA error. The arithmetic: blocks_per_sm_for(SmLimits, registers, team_size, scratch_bytes).
//   multiprocessor_count<ExecSpace>()               the current CUDA device's SM count (-1 off CUDA)
// Both name Kokkos::Impl launch types of Kokkos 4.5 (the one LAMMPS 4 Feb 2025 requires); off CUDA, or for
// a non-CUDA execution space, they do nothing.
#pragma once
#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <utility>
#include <string>
#include <type_traits>

namespace batmobile {
namespace kernels {

namespace detail {
// Policies with Kokkos's launch hints (CUDA reads them; cuda_launch.hpp launches with them). Heavy-weight: the driver
// goes through Kokkos's constant buffer whatever Kokkos's size threshold for kernel arguments; light-weight: a driver
// of up to 4 KB goes as a kernel argument.
template <class Policy>
auto heavy_weight(const Policy& policy) {
  return Kokkos::Experimental::require(policy, Kokkos::Experimental::WorkItemProperty::HintHeavyWeight);
}
template <class Policy>
auto light_weight(const Policy& policy) {
  return Kokkos::Experimental::require(policy, Kokkos::Experimental::WorkItemProperty::HintLightWeight);
}
}  // namespace detail

#ifdef KOKKOS_ENABLE_CUDA
// Throws std::runtime_error "batmobile: WHAT: <CUDA error>" unless err is cudaSuccess (also lanes.hpp, cuda_launch.hpp).
inline void check_cuda(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw std::runtime_error("batmobile: " + what + ": " + cudaGetErrorString(err));
}

namespace detail {
// The kernel of Kokkos's launch of Functor with Policy through parallel_for_constant
template <class Functor, class Policy>
const void* kokkos_cuda_kernel() {
  using Driver = Kokkos::Impl::ParallelFor<Functor, decltype(heavy_weight(std::declval<Policy>())), Kokkos::Cuda>;
  using Launch = Kokkos::Impl::CudaParallelLaunch<Driver, typename Policy::launch_bounds>;
  return reinterpret_cast<const void*>(Launch::get_kernel_func());
}
}  // namespace detail
#endif

// What blocks_per_sm counts, for a kernel of `regs` registers per thread on an SM with these limits (pure, so that
// tests check it on any back-end; H200: 65536 registers, 2048 threads, 32 blocks, 233472 B of shared memory, 1024 B
// reserved per block; 132 SMs).
struct SmLimits {
  int regs = 65536, threads = 2048, blocks = 32;
  size_t shmem = 233472, reserved_per_block = 1024;
  int sms = 132;
};

#ifdef KOKKOS_ENABLE_CUDA
// The current CUDA device's limits, read once per process (blocks_per_sm, multiprocessor_count).
inline const SmLimits& cuda_sm_limits() {
  static const SmLimits sm = [] {
    cudaDeviceProp p{};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess)
      throw std::runtime_error("batmobile: cannot read the CUDA device properties");
    return SmLimits{p.regsPerMultiprocessor, p.maxThreadsPerMultiProcessor, p.maxBlocksPerMultiProcessor,
                    p.sharedMemPerMultiprocessor, p.reservedSharedMemPerBlock, p.multiProcessorCount};
  }();
  return sm;
}
#endif
inline int blocks_per_sm_for(const SmLimits& sm, int regs, int team_size, size_t scratch_bytes) {
  const int warps = (team_size + 31) / 32;
  const int warp_regs = (regs * 32 + 255) / 256 * 256;  // allocated per warp in units of 256
  const int by_regs = warp_regs > 0 ? sm.regs / warp_regs / warps : sm.blocks;
  const size_t block_shmem = scratch_bytes + sizeof(double) * (size_t(team_size) + 2) + sm.reserved_per_block;
  const int by_shmem = int(sm.shmem / block_shmem);
  const int by_threads = sm.threads / (warps * 32);
  int blocks = by_regs < by_shmem ? by_regs : by_shmem;
  blocks = blocks < by_threads ? blocks : by_threads;
  return blocks < sm.blocks ? blocks : sm.blocks;
}

template <class Functor, class Policy>
int blocks_per_sm(int team_size, size_t scratch_bytes) {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<typename Policy::execution_space, Kokkos::Cuda>::value) {
    // per kernel, read once: the launch policies ask at every step (atom_team_policy)
    static const int regs = [] {
      cudaFuncAttributes attr;
      check_cuda(cudaFuncGetAttributes(&attr, detail::kokkos_cuda_kernel<Functor, Policy>()), "kernel attributes");
      return attr.numRegs;
    }();
    return blocks_per_sm_for(cuda_sm_limits(), regs, team_size, scratch_bytes);
  }
#endif
  (void)team_size, (void)scratch_bytes;
  return -1;
}

template <class ExecSpace>
int multiprocessor_count() {
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) return cuda_sm_limits().sms;
#endif
  return -1;
}

}  // namespace kernels
}  // namespace batmobile
