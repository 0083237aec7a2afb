// IndexMapGhostExchange (model.hpp): the stand-alone exchange for periodic images.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "model/model.hpp"

namespace batmobile {

template <class T, class ExecSpace>
IndexMapGhostExchange<T, ExecSpace>::IndexMapGhostExchange(int n_local, const std::vector<int>& ghost_owner) {
  update(n_local, ghost_owner);
}

// The packed array is [owner (ng) | offsets (n_local + 1) | list (ng)]. The GPU's work queued before the upload
// still reads the old map, so the upload is queued behind it rather than waited for; the staging is rewritten only
// once its last upload has run (long since, at the next re-neighbouring). Both arrays grow by a fifth beyond the
// need, so that the ghost count's small changes between re-neighbourings allocate nothing.
template <class T, class ExecSpace>
void IndexMapGhostExchange<T, ExecSpace>::update(int n_local, const std::vector<int>& ghost_owner) {
  const int ng = static_cast<int>(ghost_owner.size());
  for (int g = 0; g < ng; ++g)
    if (ghost_owner[g] < 0 || ghost_owner[g] >= n_local) throw std::runtime_error("ghost owner out of range");
  const size_t size = 2 * static_cast<size_t>(ng) + n_local + 1;
  const size_t capacity = size + size / 5 + 16;
  uploaded_.wait();
  if (staging_.extent(0) < size) staging_ = decltype(staging_)("bm_image_map_staging", capacity);
  if (packed_.extent(0) < size) packed_ = decltype(packed_)("bm_image_map", capacity);
  int* owner = staging_.data();
  int* offsets = owner + ng;
  int* list = offsets + n_local + 1;
  std::fill(offsets, offsets + n_local + 1, 0);
  for (int g = 0; g < ng; ++g) {
    owner[g] = ghost_owner[g];
    ++offsets[ghost_owner[g] + 1];
  }
  for (int i = 0; i < n_local; ++i) offsets[i + 1] += offsets[i];
  std::vector<int> fill(offsets, offsets + n_local);
  for (int g = 0; g < ng; ++g) list[fill[ghost_owner[g]]++] = g;
  const auto part = [&](auto view, size_t begin, size_t end) {
    return Kokkos::subview(view, Kokkos::make_pair(begin, end));
  };
  Kokkos::deep_copy(ExecSpace(), part(packed_, 0, size), part(staging_, 0, size));
  uploaded_.record();
  n_local_ = n_local;
  owner_ = part(packed_, 0, ng);
  ghost_offsets_ = part(packed_, ng, ng + n_local + 1);
  ghost_list_ = part(packed_, ng + n_local + 1, size);
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
