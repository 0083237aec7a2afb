// AsyncReadback (src/kernels/async_readback.hpp): values a kernel writes into target() come back after mark(), and a
// second round overwrites the first; on the default execution space (CUDA on the GPU machine: the pinned buffer that
// the reduction and the kernel write directly).
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/async_readback.hpp"

namespace {
using Exec = Kokkos::DefaultExecutionSpace;
using Readback = batmobile::kernels::AsyncReadback<Exec, 2>;

// The minimum of values and their count, written as the pair style writes its edge statistics: a Min reduction into
// target(0) and a kernel into target(1), then mark().
void reduce_into(Readback& rb, const std::vector<double>& values) {
  Kokkos::View<double*, Exec> v("values", values.size());
  Kokkos::deep_copy(v, Kokkos::View<const double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                           values.data(), values.size()));
  auto t = rb.target();
  const Kokkos::View<double, typename Readback::TargetView::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      min_d(t.data());
  const int n = static_cast<int>(values.size());
  Kokkos::parallel_reduce(
      "test_readback_min", Kokkos::RangePolicy<Exec>(0, n),
      KOKKOS_LAMBDA(int i, double& m) {
        if (v(i) < m) m = v(i);
      },
      Kokkos::Min<double, typename Readback::TargetView::memory_space>(min_d));
  Kokkos::parallel_for(
      "test_readback_count", Kokkos::RangePolicy<Exec>(0, 1), KOKKOS_LAMBDA(int) { t(1) = n; });
  rb.mark();
}
}  // namespace

TEST(AsyncReadback, KernelsWriteTargetDirectly) {
  Readback rb;
  EXPECT_FALSE(rb.pending());
  reduce_into(rb, {4.5, 2.25, 9.0, 3.0});
  EXPECT_TRUE(rb.pending());
  auto v = rb.values();
  EXPECT_EQ(v[0], 2.25);
  EXPECT_EQ(v[1], 4.0);
  EXPECT_TRUE(rb.pending());
  v = rb.take();
  EXPECT_FALSE(rb.pending());
  EXPECT_EQ(v[0], 2.25);
  // a second round, more values than one GPU block reduces: the reduction's result replaces the first round's
  std::vector<double> many(5000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = 10.0 + double((i * 7919) % 5000);
  many[3777] = 1.5;
  reduce_into(rb, many);
  v = rb.take();
  EXPECT_EQ(v[0], 1.5);
  EXPECT_EQ(v[1], 5000.0);
  // no values: Kokkos's Min identity
  reduce_into(rb, {});
  v = rb.take();
  EXPECT_GT(v[0], 1e300);
  EXPECT_EQ(v[1], 0.0);
}
