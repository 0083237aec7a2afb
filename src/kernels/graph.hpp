// Neighbour graph in the two CSR orders used by the kernels.
//
// Edge e is i <- j (receiver i, sender j), r_ij = x_j - x_i. Receivers are atoms 0..n_recv-1 (local atoms),
// senders any atom 0..n_total-1 (ghosts included). Edge ids are ordered by receiver:
//   recv_offsets (n_recv + 1): edges of receiver i are e in [recv_offsets(i), recv_offsets(i+1))
//   edge_sender (E), edge_receiver (E)
// and a sender-grouped permutation for the adjoint gathers (no atomics):
//   send_offsets (n_total + 1), send_edges (E): edge ids whose sender is j are
//   send_edges(s) for s in [send_offsets(j), send_offsets(j+1)).
// Positions x (n_total, 3) include ghost images. The kernels skip pairs with d >= r_c or d == 0.
// The pair adjoint (interaction_adjoint.hpp) needs the graph symmetric within r_c, as LAMMPS's full neighbour lists
// are: with edge i <- j (0 < d < r_c) and j owned (or, with sender groups, an image of owned atom j0), the reverse
// edge j <- i (j0 <- an image of i) is in the graph too. It computes that reverse edge's sender terms from edge
// i <- j instead of reading it.
// Sender groups (n_send >= 0): send_offsets then has n_send + 1 entries and group j lists the edges of every sender
// that is a periodic image of atom j (the model's one-rank ghost exchange: same h, q, k rows); the sender adjoint
// runs one team per group, takes each edge's geometry from its own sender edge_sender(e), and writes the group's
// forces, virials, dE/dh and dE/dk to row j (what LAMMPS's reverse communication would have added there). n_send = -1:
// one group per atom (n_total). image_owner (n_total - n_recv, with sender groups): the owned atom of each ghost.
// The adjoint's pair teams use it to find each edge's reverse on this rank (InteractionKernel::reverse_receiver).
//
// make_graph(x, n_recv, receivers, senders) builds everything on the host (counting sort) and copies it to
// Device; edges may be given in any order (they are re-ordered by receiver, stably).
#pragma once
#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <vector>

namespace batmobile {
namespace kernels {

template <class T, class Device>
struct Graph {
  Kokkos::View<const T* [3], Kokkos::LayoutRight, Device> x;
  Kokkos::View<const int*, Device> recv_offsets, edge_sender, edge_receiver, send_offsets, send_edges, image_owner;
  int n_recv = 0, n_total = 0, n_edges = 0;
  int n_send = -1;  // sender groups (see above); -1: n_total
  int senders() const { return n_send >= 0 ? n_send : n_total; }
};

template <class T, class Device>
Graph<T, Device> make_graph(const std::vector<T>& x_flat, int n_recv, const std::vector<int>& receivers,
                            const std::vector<int>& senders) {
  const int n_total = int(x_flat.size() / 3);
  const int E = int(receivers.size());
  if (senders.size() != receivers.size()) throw std::invalid_argument("make_graph: size mismatch");
  std::vector<int> roff(n_recv + 1, 0), soff(n_total + 1, 0);
  for (int e = 0; e < E; ++e) {
    if (receivers[e] < 0 || receivers[e] >= n_recv || senders[e] < 0 || senders[e] >= n_total)
      throw std::invalid_argument("make_graph: atom index out of range");
    roff[receivers[e] + 1]++;
  }
  for (int i = 0; i < n_recv; ++i) roff[i + 1] += roff[i];
  std::vector<int> es(E), er(E), fill(roff.begin(), roff.end() - 1);
  for (int e = 0; e < E; ++e) {
    const int slot = fill[receivers[e]]++;
    es[slot] = senders[e];
    er[slot] = receivers[e];
  }
  for (int e = 0; e < E; ++e) soff[es[e] + 1]++;
  for (int j = 0; j < n_total; ++j) soff[j + 1] += soff[j];
  std::vector<int> se(E), sfill(soff.begin(), soff.end() - 1);
  for (int e = 0; e < E; ++e) se[sfill[es[e]]++] = e;

  auto to_dev = [](const std::vector<int>& v, const char* name) {
    Kokkos::View<int*, Device> d(std::string(name), v.size());
    auto hm = Kokkos::create_mirror_view(d);
    for (size_t k = 0; k < v.size(); ++k) hm(k) = v[k];
    Kokkos::deep_copy(d, hm);
    return d;
  };
  Kokkos::View<T* [3], Kokkos::LayoutRight, Device> xd("graph_x", n_total);
  auto xh = Kokkos::create_mirror_view(xd);
  for (int n = 0; n < n_total; ++n)
    for (int a = 0; a < 3; ++a) xh(n, a) = x_flat[3 * n + a];
  Kokkos::deep_copy(xd, xh);
  Graph<T, Device> g;
  g.x = xd;
  g.recv_offsets = to_dev(roff, "recv_offsets");
  g.edge_sender = to_dev(es, "edge_sender");
  g.edge_receiver = to_dev(er, "edge_receiver");
  g.send_offsets = to_dev(soff, "send_offsets");
  g.send_edges = to_dev(se, "send_edges");
  g.n_recv = n_recv;
  g.n_total = n_total;
  g.n_edges = E;
  return g;
}

}  // namespace kernels
}  // namespace batmobile
