// IndexMapGhostExchange (model.hpp): the stand-alone exchange for periodic images.
#pragma once
#include <stdexcept>
#include <vector>

#include "model/model.hpp"

namespace batmobile {

template <class T, class ExecSpace>
IndexMapGhostExchange<T, ExecSpace>::IndexMapGhostExchange(int n_local, const std::vector<int>& ghost_owner)
    : n_local_(n_local) {
  const int ng = static_cast<int>(ghost_owner.size());
  owner_ = Kokkos::View<int*, ExecSpace>("ghost_owner", ng);
  auto h_owner = Kokkos::create_mirror_view(owner_);
  std::vector<int> count(n_local + 1, 0);
  for (int g = 0; g < ng; ++g) {
    if (ghost_owner[g] < 0 || ghost_owner[g] >= n_local) throw std::runtime_error("ghost owner out of range");
    h_owner(g) = ghost_owner[g];
    ++count[ghost_owner[g] + 1];
  }
  for (int i = 0; i < n_local; ++i) count[i + 1] += count[i];
  ghost_offsets_ = Kokkos::View<int*, ExecSpace>("ghost_offsets", n_local + 1);
  ghost_list_ = Kokkos::View<int*, ExecSpace>("ghost_list", ng);
  auto h_off = Kokkos::create_mirror_view(ghost_offsets_);
  auto h_list = Kokkos::create_mirror_view(ghost_list_);
  std::vector<int> fill(count.begin(), count.end() - 1);
  for (int i = 0; i <= n_local; ++i) h_off(i) = count[i];
  for (int g = 0; g < ng; ++g) h_list(fill[ghost_owner[g]]++) = g;
  Kokkos::deep_copy(owner_, h_owner);
  Kokkos::deep_copy(ghost_offsets_, h_off);
  Kokkos::deep_copy(ghost_list_, h_list);
}

// Row-copy kernels over flat (row, feature) indices so that neighbouring GPU threads touch neighbouring features.
template <class T, class ExecSpace>
void IndexMapGhostExchange<T, ExecSpace>::forward(FeatureView h) {
  auto owner = owner_;
  const int nl = n_local_, width = static_cast<int>(h.extent(1)), ng = static_cast<int>(owner.extent(0));
  if (ng == 0) return;
  Kokkos::parallel_for(
      "bm_ghost_forward", Kokkos::RangePolicy<ExecSpace>(0, ng * width), KOKKOS_LAMBDA(int n) {
        const int g = n / width, x = n % width;
        h(nl + g, x) = h(owner(g), x);
      });
}

template <class T, class ExecSpace>
void IndexMapGhostExchange<T, ExecSpace>::reverse(FeatureView dh) {
  auto off = ghost_offsets_;
  auto list = ghost_list_;
  const int nl = n_local_, width = static_cast<int>(dh.extent(1)), ng = static_cast<int>(list.extent(0));
  if (ng == 0) return;
  // every ghost is in exactly one owner's list, so the thread that folds a ghost value in also zeroes it (one
  // launch instead of a second pass over the ghost rows)
  Kokkos::parallel_for(
      "bm_ghost_reverse", Kokkos::RangePolicy<ExecSpace>(0, nl * width), KOKKOS_LAMBDA(int n) {
        const int i = n / width, x = n % width;
        for (int q = off(i); q < off(i + 1); ++q) {
          T& g = dh(nl + list(q), x);
          dh(i, x) += g;
          g = 0;
        }
      });
}

}  // namespace batmobile
