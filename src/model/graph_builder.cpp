#include "model/graph_builder.hpp"

#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

namespace batmobile {

HostGraph build_periodic_graph(const std::vector<double>& pos, const std::vector<int>& species, const double cell[9],
                               const bool pbc[3], double r_c) {
  HostGraph g;
  const int n = static_cast<int>(species.size());
  g.n_local = n;
  g.x = pos;
  g.species = species;
  // Number of images per direction: r_c over the distance between opposite cell faces.
  const double* a = cell;
  const double* b = cell + 3;
  const double* c = cell + 6;
  auto cross = [](const double* u, const double* v, double* w) {
    w[0] = u[1] * v[2] - u[2] * v[1];
    w[1] = u[2] * v[0] - u[0] * v[2];
    w[2] = u[0] * v[1] - u[1] * v[0];
  };
  double bc[3], ca[3], ab[3];
  cross(b, c, bc);
  cross(c, a, ca);
  cross(a, b, ab);
  const double vol = std::fabs(a[0] * bc[0] + a[1] * bc[1] + a[2] * bc[2]);
  auto norm = [](const double* v) { return std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]); };
  int nimg[3];
  const double heights[3] = {vol / norm(bc), vol / norm(ca), vol / norm(ab)};
  for (int d = 0; d < 3; ++d) nimg[d] = pbc[d] ? static_cast<int>(std::ceil(r_c / heights[d])) : 0;
  std::map<std::tuple<int, int, int, int>, int> ghost_index;
  std::vector<std::vector<int>> nbr(n);
  for (int i = 0; i < n; ++i) {
    for (int s0 = -nimg[0]; s0 <= nimg[0]; ++s0)
      for (int s1 = -nimg[1]; s1 <= nimg[1]; ++s1)
        for (int s2 = -nimg[2]; s2 <= nimg[2]; ++s2)
          for (int j = 0; j < n; ++j) {
            const bool home = s0 == 0 && s1 == 0 && s2 == 0;
            if (home && i == j) continue;
            double xj[3];
            for (int d = 0; d < 3; ++d) xj[d] = pos[3 * j + d] + s0 * a[d] + s1 * b[d] + s2 * c[d];
            const double dx = xj[0] - pos[3 * i], dy = xj[1] - pos[3 * i + 1], dz = xj[2] - pos[3 * i + 2];
            const double d2 = dx * dx + dy * dy + dz * dz;
            if (d2 >= r_c * r_c || d2 == 0) continue;
            int idx = j;
            if (!home) {
              auto key = std::make_tuple(j, s0, s1, s2);
              auto it = ghost_index.find(key);
              if (it == ghost_index.end()) {
                idx = n + static_cast<int>(g.ghost_owner.size());
                ghost_index[key] = idx;
                g.ghost_owner.push_back(j);
                for (int d = 0; d < 3; ++d) g.x.push_back(xj[d]);
                g.species.push_back(species[j]);
              } else {
                idx = it->second;
              }
            }
            nbr[i].push_back(idx);
          }
  }
  g.n_all = n + static_cast<int>(g.ghost_owner.size());
  g.recv_offsets.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    g.recv_offsets[i + 1] = g.recv_offsets[i] + static_cast<int>(nbr[i].size());
    g.senders.insert(g.senders.end(), nbr[i].begin(), nbr[i].end());
  }
  return g;
}

}  // namespace batmobile
