// Compile-time partition of a tensor-product path set into NG groups of similar Clebsch-Gordan work, so that a
// kernel can give each channel NG threads (one per group) instead of one thread doing every path. Each thread then
// keeps only its group's weights, products and outputs live: fewer registers, no spills, more warps per SM, and a
// shorter chain of dependent work per thread (the L = 3 all-path conv adjoints spilled 700 B per thread with one).
//
// Public API (namespace batmobile::kernels):
//   PathKey                         what must stay inside one group, so that groups write disjoint outputs:
//     PathKey::l1                   paths with the same input degree l1 (a pass that owns dE/dh[l1 block])
//     PathKey::output               paths with the same output irrep (l3, parity) (a pass that owns out slots)
//     PathKey::path                 each path alone (a pass that owns dE/dw[p])
//   path_group<L, ALL, KEY, NG>(p)  the group (0..NG-1) of path p; greedy longest-first balancing of the keys'
//                                   CG nonzero counts (cg::Path<l1, l2, l3>::count), all at compile time
//   AllPaths, InGroup<L, ALL, KEY, NG, G>
//                                   path selectors for the tp_* helpers: Sel::has(p) is constexpr
//   key_in_group<L, ALL, KEY, NG, G>(l1_or_l3, parity)
//                                   whether group G owns input degree l1 (KEY l1) or output (l3, parity) (KEY output)
//   default_path_groups(L, ALL)     3 for path sets of >= 20 paths (L = 3), else 1
#pragma once
#include "common.hpp"
#include "generated/cg_tables.hpp"

namespace batmobile {
namespace kernels {

enum class PathKey { l1, output, path };

namespace detail {

constexpr int kMaxPaths = 64;

template <int L, bool ALL, int... I>
KOKKOS_INLINE_FUNCTION constexpr int path_cg_count(int p, std::integer_sequence<int, I...>) {
  const int counts[] = {cg::Path<path_at(L, ALL, I).l1, path_at(L, ALL, I).l2, path_at(L, ALL, I).l3>::count...};
  return counts[p];
}

KOKKOS_INLINE_FUNCTION constexpr int path_key(PathLs q, PathKey key, int p) {
  return key == PathKey::l1 ? q.l1 : key == PathKey::output ? 2 * q.l3 + (q.l1 + q.l2) % 2 : p;
}

// Group of every path: keys sorted by descending work, each given to the currently lightest group.
template <int L, bool ALL, PathKey KEY, int NG>
struct PathGroupTable {
  static constexpr int P = num_paths(L, ALL);
  int group[kMaxPaths] = {};
  KOKKOS_INLINE_FUNCTION constexpr PathGroupTable() {
    static_assert(P <= kMaxPaths && NG >= 1, "path set too large or no groups");
    int key_work[kMaxPaths] = {};
    bool key_used[kMaxPaths] = {};
    for (int p = 0; p < P; ++p) {
      const int k = path_key(path_at(L, ALL, p), KEY, p);
      key_work[k] += path_cg_count<L, ALL>(p, std::make_integer_sequence<int, P>{});
      key_used[k] = true;
    }
    int key_group[kMaxPaths] = {};
    int load[NG] = {};
    for (;;) {
      int best = -1;
      for (int k = 0; k < kMaxPaths; ++k)
        if (key_used[k] && (best < 0 || key_work[k] > key_work[best])) best = k;
      if (best < 0) break;
      int g = 0;
      for (int h = 1; h < NG; ++h)
        if (load[h] < load[g]) g = h;
      key_group[best] = g;
      load[g] += key_work[best];
      key_used[best] = false;
    }
    for (int p = 0; p < P; ++p) group[p] = key_group[path_key(path_at(L, ALL, p), KEY, p)];
  }
};

}  // namespace detail

KOKKOS_INLINE_FUNCTION constexpr int default_path_groups(int L, bool all) { return num_paths(L, all) >= 20 ? 3 : 1; }

template <int L, bool ALL, PathKey KEY, int NG>
KOKKOS_INLINE_FUNCTION constexpr int path_group(int p) {
  return detail::PathGroupTable<L, ALL, KEY, NG>().group[p];
}

struct AllPaths {
  KOKKOS_INLINE_FUNCTION static constexpr bool has(int) { return true; }
};

template <int L, bool ALL, PathKey KEY, int NG, int G>
struct InGroup {
  KOKKOS_INLINE_FUNCTION static constexpr bool has(int p) { return path_group<L, ALL, KEY, NG>(p) == G; }
};

// KEY l1: does group G own input degree `l` (parity ignored)? KEY output: does it own output (l, parity of l1 + l2)?
// A key no path of the set has belongs to group 0 (which then writes its zeros).
template <int L, bool ALL, PathKey KEY, int NG, int G>
KOKKOS_INLINE_FUNCTION constexpr bool key_in_group(int l, int parity) {
  static_assert(KEY != PathKey::path, "per-path groups own dE/dw[p]: use InGroup::has(p)");
  for (int p = 0; p < num_paths(L, ALL); ++p) {
    const PathLs q = path_at(L, ALL, p);
    const bool match = KEY == PathKey::l1 ? q.l1 == l : (q.l3 == l && (q.l1 + q.l2) % 2 == parity);
    if (match) return path_group<L, ALL, KEY, NG>(p) == G;
  }
  return G == 0;
}

}  // namespace kernels
}  // namespace batmobile
