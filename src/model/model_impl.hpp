// Template implementation of model.hpp; included by the explicit-instantiation files model_{device,host}_*.cpp only.
#pragma once
#include <algorithm>
#include <utility>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/generated/cg_tables.hpp"
#include "kernels/interaction.hpp"
#include "model/fused_layer.hpp"
#include "model/fused_team_rule.hpp"
#include "kernels/sh.hpp"
#include "model/model.hpp"
#include "model/sender_csr.hpp"

namespace batmobile {
namespace model_detail {

constexpr double kNormEps = 1e-6;
constexpr int kNodeTeam = 128;  // GPU threads per team in the node kernels
// Most atoms per node-kernel team: each thread's item applies a weight to all atoms of the block (register arrays
// of this size), so that weights are read once per block instead of once per atom.
constexpr int kNodeAtoms = 4;
constexpr double kPi = 3.14159265358979323846;

// Calls f(std::integral_constant<int, L>) with the fused kernels' feature degree L (1, 2 or 3; the model's
// constructor has checked it), returning what f returns.
template <class F>
decltype(auto) with_feature_degree(int L, F&& f) {
  switch (L) {
    case 1: return f(std::integral_constant<int, 1>());
    case 2: return f(std::integral_constant<int, 2>());
    default: return f(std::integral_constant<int, 3>());
  }
}

template <class T>
KOKKOS_INLINE_FUNCTION T sigmoid(T x) { return T(1) / (T(1) + Kokkos::Experimental::exp(-x)); }

// Degree l of the spherical-harmonic component k = l^2 + m.
KOKKOS_INLINE_FUNCTION int degree_of(int k) {
  int l = 0;
  while ((l + 1) * (l + 1) <= k) ++l;
  return l;
}
template <class T>
KOKKOS_INLINE_FUNCTION T silu(T x) { return x * sigmoid(x); }
template <class T>
KOKKOS_INLINE_FUNCTION T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}

// The model's degree L is a runtime value; the kernel library's SH polynomials take it as a template argument.
template <class S>
KOKKOS_INLINE_FUNCTION void sh_unit_runtime_l(int L, const S& x, const S& y, const S& z, S* Y) {
  switch (L) {
    case 0: kernels::sh_unit<0, S>(x, y, z, Y); break;
    case 1: kernels::sh_unit<1, S>(x, y, z, Y); break;
    case 2: kernels::sh_unit<2, S>(x, y, z, Y); break;
    default: kernels::sh_unit<3, S>(x, y, z, Y); break;
  }
}

// Y_k of the unit vector u (already normalised in double by edge_geometry).
template <class T>
KOKKOS_INLINE_FUNCTION void sh_values(int L, const T* u, T* Y) {
  sh_unit_runtime_l<T>(L, u[0], u[1], u[2], Y);
}

// dY[k][a] = dY_k / du_a, treating the three unit-vector components as independent (the caller projects
// onto the tangent plane and divides by |r|); dual numbers seeded with the identity.
template <class T>
KOKKOS_INLINE_FUNCTION void sh_gradient(int L, const T* u, T (*dY)[3]) {
  using D3 = kernels::Dual3<T>;
  D3 Yd[kernels::num_sh(3)];
  sh_unit_runtime_l<D3>(L, D3(u[0], 1, 0, 0), D3(u[1], 0, 1, 0), D3(u[2], 0, 0, 1), Yd);
  for (int k = 0; k < kernels::num_sh(L); ++k)
    for (int a = 0; a < 3; ++a) dY[k][a] = Yd[k].d[a];
}

// Per-edge geometry and basis; derivatives only when requested.
template <class T>
struct EdgeGeom {
  T r[3], d, u_hat[3], B[kMaxNB], dB[kMaxNB], env, denv, Y[kMaxK];
};

template <class T, class D>
KOKKOS_INLINE_FUNCTION void edge_geometry(const D& md, const double* xi, const double* xj, bool with_grad,
                                          EdgeGeom<T>& g) {
  double r[3] = {xj[0] - xi[0], xj[1] - xi[1], xj[2] - xi[2]};
  double d = Kokkos::Experimental::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  for (int a = 0; a < 3; ++a) {
    g.r[a] = T(r[a]);
    g.u_hat[a] = T(r[a] / d);
  }
  g.d = T(d);
  const T rc = md.r_c, dd = g.d;
  const T pref = Kokkos::Experimental::sqrt(T(2) / rc);
  for (int n = 0; n < md.NB; ++n) {
    const T kn = T(n + 1) * T(kPi) / rc;
    const T s = Kokkos::Experimental::sin(kn * dd), c = Kokkos::Experimental::cos(kn * dd);
    g.B[n] = pref * s / dd;
    if (with_grad) g.dB[n] = pref * (kn * c / dd - s / (dd * dd));
  }
  const T x = dd / rc;
  if (x < T(1)) {
    const T x2 = x * x, x5 = x2 * x2 * x, x6 = x5 * x;
    g.env = T(1) - T(28) * x6 + T(48) * x6 * x - T(21) * x6 * x2;
    g.denv = (T(-168) * x5 + T(336) * x6 - T(168) * x6 * x) / rc;
  } else {
    g.env = 0;
    g.denv = 0;
  }
  sh_values<T>(md.L, g.u_hat, g.Y);
}

// Hidden pre-activation of the radial MLP only (when the output R0 comes from the per-edge cache).
template <class T, class D>
KOKKOS_INLINE_FUNCTION void radial_hidden(const D& md, int lb, const T* B, T* a1) {
  const T* W1 = &md.w(lb + md.o_W1);
  const T* b1 = &md.w(lb + md.o_b1);
  for (int h = 0; h < md.H; ++h) {
    T acc = b1[h];
    for (int n = 0; n < md.NB; ++n) acc += W1[h * md.NB + n] * B[n];
    a1[h] = acc;
  }
}

// Radial MLP: a1 = W1 B + b1 (pre-activation, H), R0 = W2 silu(a1) (2PC, without envelope).
template <class T, class D>
KOKKOS_INLINE_FUNCTION void radial_mlp(const D& md, int lb, const T* B, T* a1, T* R0) {
  radial_hidden<T>(md, lb, B, a1);
  T s1[kMaxH];
  for (int h = 0; h < md.H; ++h) s1[h] = silu(a1[h]);
  // axpy form over the contiguous rows of W2^T: vectorises without reassociating a reduction
  const T* W2t = &md.w(lb + md.o_W2t);
  const int out = 2 * md.P * md.C;
  for (int o = 0; o < out; ++o) R0[o] = 0;
  for (int h = 0; h < md.H; ++h) {
    const T sh = s1[h];
    const T* row = W2t + h * out;
    for (int o = 0; o < out; ++o) R0[o] += row[o] * sh;
  }
}

// Radial outputs of edge e in the adjoint passes: the row the forward pass cached when it was kept, else
// recomputed into R0; a1 (pre-activations, needed for the derivative) is filled either way.
template <class T, class D, class Cache>
KOKKOS_INLINE_FUNCTION const T* radial_outputs(const D& md, int lb, const T* B, T* a1, T* R0, bool cached,
                                               const Cache& rcache, int e) {
  if (cached) {
    radial_hidden<T>(md, lb, B, a1);
    return &rcache(e, 0);
  }
  radial_mlp<T>(md, lb, B, a1, R0);
  return R0;
}

// out[k3][c] += TP(hj, w)[k3][c] (w = P x C path weights, envelope already applied by the caller's scale).
template <class T, class D>
KOKKOS_INLINE_FUNCTION void tensor_product(const D& md, const T* hj, const T* w, T scale, const T* Y, T* out) {
  const int C = md.C;
  for (int n = 0; n < md.nnz; ++n) {
    const T cy = scale * md.cg_coef(n) * Y[md.cg_k2(n)];
    const T* hrow = hj + md.cg_k1(n) * C;
    const T* wrow = w + md.cg_path(n) * C;
    T* orow = out + md.cg_k3(n) * C;
    for (int c = 0; c < C; ++c) orow[c] += cy * wrow[c] * hrow[c];
  }
}

// Node kernels' atom blocks in team scratch are laid out [feature][atom], kNodeAtoms atoms (padding atoms zero), so
// that one vector load gives a feature of every atom of the block.
template <class T>
struct alignas(kNodeAtoms * sizeof(T)) BlockAtoms {
  T v[kNodeAtoms];
};
template <class T>
KOKKOS_INLINE_FUNCTION BlockAtoms<T> block_row(const T* x, int f) {
  return *reinterpret_cast<const BlockAtoms<T>*>(x + kNodeAtoms * f);
}
// Calls step(c) for c = 0 .. n-1, eight at a time so that their loads are in flight together. With it and the
// [feature][atom] rows the node kernels took 768 / 997 us (forward / adjoint) per layer at 97,200 atoms on the H200,
// against 1,463 / 2,335 with a scalar load per atom and feature and one iteration at a time (session 14); at 648 atoms
// the forward took 44 us, as with one atom per team in session 13: few teams, latency-bound either way.
template <class Step>
KOKKOS_INLINE_FUNCTION void by_eights(int n, const Step& step) {
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int u = 0; u < 8; ++u) step(c + u);
  for (; c < n; ++c) step(c);
}
// acc[a] += sum_{c < n} w[c ws] x[c][a] over the block's atoms a.
template <class T>
KOKKOS_INLINE_FUNCTION void block_fma(const T* w, int ws, const T* x, int n, T* acc) {
  by_eights(n, [&](int c) {
    const T wc = w[c * ws];
    const BlockAtoms<T> xv = block_row(x, c);
    for (int a = 0; a < kNodeAtoms; ++a) acc[a] += wc * xv.v[a];
  });
}
// Two weight columns against the same rows: acc_a[a] += sum_c wa[c ws] x[c][a], acc_b[a] += sum_c wb[c ws] x[c][a].
template <class T>
KOKKOS_INLINE_FUNCTION void block_fma2(const T* wa, const T* wb, int ws, const T* x, int n, T* acc_a, T* acc_b) {
  by_eights(n, [&](int c) {
    const T ca = wa[c * ws], cb = wb[c * ws];
    const BlockAtoms<T> xv = block_row(x, c);
    for (int a = 0; a < kNodeAtoms; ++a) {
      acc_a[a] += ca * xv.v[a];
      acc_b[a] += cb * xv.v[a];
    }
  });
}

struct V6 {
  double v[6];
  KOKKOS_INLINE_FUNCTION V6() {
    for (int a = 0; a < 6; ++a) v[a] = 0;
  }
  KOKKOS_INLINE_FUNCTION V6& operator+=(const V6& o) {
    for (int a = 0; a < 6; ++a) v[a] += o.v[a];
    return *this;
  }
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile V6& o) volatile {
    for (int a = 0; a < 6; ++a) v[a] += o.v[a];
  }
};

}  // namespace model_detail

// ---------------------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------------------
template <class T, class ExecSpace>
struct Model<T, ExecSpace>::FusedState {
  std::vector<kernels::LayerParams<T, ExecSpace>> params;
  std::vector<kernels::InteractionWork<T, ExecSpace>> work;  // per layer: q, k, M, Z saved for the adjoint
  Kokkos::View<T* [3], Kokkos::LayoutRight, ExecSpace> x;  // positions in T for the kernels
  // forces and per-atom virial accumulated by the adjoint kernels: f, vatom by the receiver adjoints, f_send,
  // vatom_send by the sender adjoints (so that the two can run side by side); summed in bm_fused_out
  Kokkos::View<double**, Kokkos::LayoutRight, ExecSpace> f, vatom, f_send, vatom_send;
  int team_size = 0;           // fused kernels' GPU team size (ModelOptions::interaction_team), 0 = automatic
  int forward_team_size = -1;  // the forward kernel's (ModelOptions::forward_team), -1 = as team_size
  // Layer 0 runs through the embedding-input kernels (its input, the species embedding, holds only l = 0 and does not
  // depend on the positions: the tensor products use the paths (0, l, l), the adjoints skip dE/dh, dE/dq, dE/dk), the
  // last layer through the scalar-output kernels (only its l = 0 outputs reach the energy: the paths (l, l, 0)),
  // layers between through the general ones (src/kernels/interaction.hpp). A one-layer model runs its layer as an
  // embedding-input one (both roles at once are not compiled).
  //
  // The scalar-output layer's node update runs over l = 0 alone: only those rows of its output reach the readout,
  // the adjoint's dE/dh there is 0 for l >= 1, and those kernels read dE/dm and dE/do for l = 0 only. Its l >= 1
  // outputs stay unset.
  //
  // Layer 0's q and k of each species' embedding (S, A dk), projected once at construction by the forward's own
  // functor (kernels::ProjectQK) in T, so that the embedding kernel writes every atom's q and k and layer 0's forward
  // launches no projection (bit-identical to the per-atom projection). Empty: not used (no species, or A dk > K C).
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> species_q, species_k;
  static int role(int t, int layers) {
    if (t == 0) return kernels::kEmbeddingInput;
    return t == layers - 1 ? kernels::kScalarOutput : kernels::kGeneralLayer;
  }
  // Highest degree that layer t's node update and its adjoint compute (L: all; 0 for the scalar-output layer).
  static int update_lmax(int t, int layers, int L) { return role(t, layers) == kernels::kScalarOutput ? 0 : L; }
};

template <class T, class ExecSpace>
Model<T, ExecSpace>::~Model() = default;

template <class T, class ExecSpace>
Model<T, ExecSpace>::Model(const ModelFile& file, EdgeBackend backend, const ModelOptions& options)
    : backend_(backend), hyper_(file.hyper), options_(options) {
  validate_options(options_, hyper_.H);
  static_assert(model_detail::kNodeAtoms == 4, "ModelOptions::node_atoms accepts 1..4");
  node_team_ = options_.node_team > 0 ? options_.node_team
                                      : kernels::runs_on_host<ExecSpace> ? 1 : model_detail::kNodeTeam;
  node_atoms_ = options_.node_atoms;
  const ModelHyper& hp = hyper_;
  auto& md = d_;
  md.L = hp.L;
  md.K = hp.K();
  md.C = hp.C;
  md.T_layers = hp.T;
  md.NB = hp.NB;
  md.H = hp.H;
  md.A = hp.A;
  md.dk = hp.dk;
  md.Hr = hp.Hr;
  md.P = count_paths(hp.L);
  md.r_c = T(hp.r_c);
  md.inv_avg = T(1.0 / hp.avg_num_neighbors);
  md.energy_scale = T(hp.energy_scale);
  const int C = md.C, L = md.L, P = md.P, S = static_cast<int>(hp.species.size());

  std::vector<double> host;
  auto append = [&](const std::string& name) {
    const auto& t = file.tensors.at(name);
    int off = static_cast<int>(host.size());
    host.insert(host.end(), t.values.begin(), t.values.end());
    return off;
  };
  md.o_embed = append("embed");
  md.o_rW1 = append("readout.W1");
  md.o_rb1 = append("readout.b1");
  md.o_rw2 = append("readout.w2");
  md.o_rb2 = append("readout.b2");
  {  // readout.W1 transposed, (C, Hr): the readout's threads over hidden units then read consecutive addresses
    const auto& W = file.tensors.at("readout.W1").values;
    md.o_rW1t = static_cast<int>(host.size());
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < hp.Hr; ++r) host.push_back(W[static_cast<size_t>(r) * C + c]);
  }
  md.layer_base = static_cast<int>(host.size());
  for (int t = 0; t < hp.T; ++t) {
    const std::string p = "layers." + std::to_string(t) + ".";
    const int base = static_cast<int>(host.size());
    auto rel = [&](const std::string& n) { return append(p + n) - base; };
    md.o_W1 = rel("radial.W1");
    md.o_b1 = rel("radial.b1");
    md.o_W2 = rel("radial.W2");
    md.o_Wg = rel("gate.Wg");
    md.o_Wq = rel("attn.Wq");
    md.o_Wk = rel("attn.Wk");
    md.o_Wm0 = rel("mix.Wm0");
    md.o_Wo0 = rel("mix.Wo0");
    md.o_b0 = rel("mix.b0");
    if (L > 0) {
      md.o_Wgm = rel("mix.Wgm");
      md.o_Wgo = rel("mix.Wgo");
      md.o_bg = rel("mix.bg");
    }
    for (int l = 1; l <= L; ++l) {
      md.o_Wm[l] = rel("mix.Wm" + std::to_string(l));
      md.o_Wo[l] = rel("mix.Wo" + std::to_string(l));
    }
    for (int l = 0; l <= L; ++l) md.o_Wu[l] = rel("update.Wu" + std::to_string(l));
    for (int l = 0; l <= L; ++l) md.o_gn[l] = rel("norm.g" + std::to_string(l));
    // transposed copy (cols, rows) of the (rows, cols) tensor `n`, offset relative to the layer
    auto transposed = [&](const std::string& n, int rows, int cols) {
      const auto& W = file.tensors.at(p + n).values;
      const int off = static_cast<int>(host.size()) - base;
      for (int c = 0; c < cols; ++c)
        for (int o = 0; o < rows; ++o) host.push_back(W[static_cast<size_t>(o) * cols + c]);
      return off;
    };
    md.o_W2t = transposed("radial.W2", 2 * P * C, hp.H);  // (H, 2PC) for the forward radial MLP
    md.o_Wm0t = transposed("mix.Wm0", C, C);
    md.o_Wo0t = transposed("mix.Wo0", C, C);
    if (L > 0) {
      md.o_Wgmt = transposed("mix.Wgm", L * C, C);
      md.o_Wgot = transposed("mix.Wgo", L * C, C);
    }
    for (int l = 1; l <= L; ++l) {
      md.o_Wmt[l] = transposed("mix.Wm" + std::to_string(l), C, C);
      md.o_Wot[l] = transposed("mix.Wo" + std::to_string(l), C, C);
    }
    for (int l = 0; l <= L; ++l) md.o_Wut[l] = transposed("update.Wu" + std::to_string(l), C, C);
    md.layer_size = static_cast<int>(host.size()) - base;
  }
  md.w = Kokkos::View<T*, ExecSpace>("bm_weights", host.size());
  auto hw = Kokkos::create_mirror_view(md.w);
  for (size_t i = 0; i < host.size(); ++i) hw(i) = T(host[i]);
  Kokkos::deep_copy(md.w, hw);
  md.E_ref = Kokkos::View<double*, ExecSpace>("bm_E_ref", S);
  auto he = Kokkos::create_mirror_view(md.E_ref);
  for (int s = 0; s < S; ++s) he(s) = file.E_ref.at(s);
  Kokkos::deep_copy(md.E_ref, he);

  // Sparse CG table for the natural-parity paths of degree <= L, in docs/model.md path order.
  int n3[kMaxL + 1] = {};
  for (int l1 = 0; l1 <= L; ++l1)
    for (int l2 = 0; l2 <= L; ++l2)
      for (int l3 = 0; l3 <= L; ++l3)
        if (l3 >= std::abs(l1 - l2) && l3 <= l1 + l2 && (l1 + l2 + l3) % 2 == 0) ++n3[l3];
  std::vector<int> k1, k2, k3, path;
  std::vector<double> coef;
  int p = 0;
  for (int l1 = 0; l1 <= L; ++l1)
    for (int l2 = 0; l2 <= L; ++l2)
      for (int l3 = 0; l3 <= L; ++l3) {
        if (!(l3 >= std::abs(l1 - l2) && l3 <= l1 + l2 && (l1 + l2 + l3) % 2 == 0)) continue;
        const double alpha = std::sqrt((2.0 * l3 + 1.0) / n3[l3]);
        bool found = false;
        for (const auto& pi : kernels::cg::kPaths) {
          if (pi.l1 != l1 || pi.l2 != l2 || pi.l3 != l3) continue;
          found = true;
          for (int e = pi.offset; e < pi.offset + pi.count; ++e) {
            const auto& en = kernels::cg::kEntries[e];
            k1.push_back(l1 * l1 + en.i1);
            k2.push_back(l2 * l2 + en.i2);
            k3.push_back(l3 * l3 + en.i3);
            path.push_back(p);
            coef.push_back(alpha * en.value);
          }
        }
        if (!found) throw std::runtime_error("CG table lacks a path");
        ++p;
      }
  if (p != P) throw std::runtime_error("path count mismatch");
  md.nnz = static_cast<int>(coef.size());
  auto upload_int = [&](const char* name, const std::vector<int>& v) {
    Kokkos::View<int*, ExecSpace> dv(std::string(name), v.size());
    auto hv = Kokkos::create_mirror_view(dv);
    for (size_t i = 0; i < v.size(); ++i) hv(i) = v[i];
    Kokkos::deep_copy(dv, hv);
    return dv;
  };
  md.cg_k1 = upload_int("bm_cg_k1", k1);
  md.cg_k2 = upload_int("bm_cg_k2", k2);
  md.cg_k3 = upload_int("bm_cg_k3", k3);
  md.cg_path = upload_int("bm_cg_path", path);
  md.cg_coef = Kokkos::View<T*, ExecSpace>("bm_cg_coef", coef.size());
  auto hc = Kokkos::create_mirror_view(md.cg_coef);
  for (size_t i = 0; i < coef.size(); ++i) hc(i) = T(coef[i]);
  Kokkos::deep_copy(md.cg_coef, hc);
  (void)C;

  if (backend_ == EdgeBackend::Fused) {
    if (L < 1 || L > 3 || hp.NB > kernels::kMaxNB || hp.dk > kernels::kMaxDk)
      throw std::runtime_error("Batmobile model: the fused kernels need 1 <= L <= 3, NB <= 16, dk <= 32 "
                               "(use the reference edge backend)");
    fused_ = std::make_unique<FusedState>();
    fused_->work.resize(hp.T);
    for (int t = 0; t < hp.T; ++t) {
      const std::string p = "layers." + std::to_string(t) + ".";
      auto v = [&](const std::string& n) { return file.tensors.at(p + n).values; };
      auto make = [&](auto Lc) {
        constexpr int Lv = decltype(Lc)::value;
        auto prm = kernels::make_layer_params<T, ExecSpace, Lv>(
            hp.C, hp.NB, hp.H, hp.A, hp.dk, hp.r_c, hp.avg_num_neighbors, v("radial.W1"), v("radial.b1"),
            v("radial.W2"), v("gate.Wg"), v("attn.Wq"), v("attn.Wk"), fused_->role(t, hp.T));
        prm.radial_mode = options_.radial_mode;
        prm.basis_chunk = options_.basis_chunk;
        prm.prepare_span = options_.prepare_span;
        if (prm.radial_mode == 3)
          kernels::attach_radial_table<T, ExecSpace, Lv>(prm, v("radial.W1"), v("radial.b1"), v("radial.W2"),
                                                         options_.radial_table_intervals);
        return prm;
      };
      fused_->params.push_back(model_detail::with_feature_degree(L, make));
    }
    // Host back-ends keep one thread per team (their thread count may be below C).
    if (!kernels::runs_on_host<ExecSpace>) {
      fused_->team_size = options_.interaction_team;
      fused_->forward_team_size = options_.forward_team;
    }
    const int S = static_cast<int>(hp.species.size()), AD = hp.A * hp.dk;
    if (fused_->role(0, hp.T) == kernels::kEmbeddingInput && AD <= d_.K * d_.C && S > 0) {
      // each species' embedding as a one-atom-per-species feature array (l = 0 rows; the model's T values)
      Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace> emb("bm_species_embedding", S, 1, hp.C);
      auto he = Kokkos::create_mirror_view(emb);
      auto hw = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d_.w);
      for (int s = 0; s < S; ++s)
        for (int c = 0; c < hp.C; ++c) he(s, 0, c) = hw(d_.o_embed + s * hp.C + c);
      Kokkos::deep_copy(emb, he);
      fused_->species_q = decltype(fused_->species_q)("bm_species_q", S, AD);
      fused_->species_k = decltype(fused_->species_k)("bm_species_k", S, AD);
      const auto& prm = fused_->params[0];
      const kernels::ProjectQK<T, ExecSpace> pq{emb,      {}, prm.Wq, prm.Wk, prm.WqT, prm.WkT, fused_->species_q,
                                                fused_->species_k, {}, {}, S, hp.C, AD};
      Kokkos::parallel_for("bm_species_qk",
                           Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, int64_t(S) * AD), pq);
    }
  }
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::ensure_capacity(int n_local, int n_all, int n_edges) {
  const int KC = d_.K * d_.C, T_ = d_.T_layers, A = d_.A, AD = d_.A * d_.dk;
  // Grow-only with headroom: LAMMPS changes the atom and edge counts at every re-neighbouring.
  auto grow = [](size_t n) { return n + n / 5 + 16; };
  auto need = [&](auto& v, size_t n0, size_t n1, const char* name) {
    if (v.extent(0) < n0 || v.extent(1) != n1) v = std::decay_t<decltype(v)>(std::string(name), grow(n0), n1);
  };
  h_.resize(T_ + 1);
  m_.resize(T_), o_.resize(T_), z_.resize(T_), hp_.resize(T_), gam_.resize(T_), rms_.resize(T_);
  q_.resize(T_), k_.resize(T_), smax_.resize(T_), zsum_.resize(T_);
  for (int t = 0; t <= T_; ++t) need(h_[t], n_all, KC, "bm_h");
  for (int t = 0; t < T_; ++t) {
    need(m_[t], n_local, KC, "bm_m");
    need(o_[t], n_local, KC, "bm_o");
    need(z_[t], n_local, KC, "bm_z");
    need(hp_[t], n_local, KC, "bm_hp");
    need(gam_[t], n_local, std::max(1, d_.L * d_.C), "bm_gam");
    need(rms_[t], n_local, d_.L + 1, "bm_rms");
    need(q_[t], n_local, AD, "bm_q");
    need(k_[t], n_all, AD, "bm_k");
    need(smax_[t], n_local, A, "bm_smax");
    need(zsum_[t], n_local, A, "bm_zsum");
  }
  need(dh_, n_all, KC, "bm_dh");
  need(dh_prev_, n_all, KC, "bm_dh_prev");
  need(dm_, n_local, KC, "bm_dm");
  need(do_, n_local, KC, "bm_do");
  need(obar_, n_local, A, "bm_obar");
  auto need1 = [&](auto& v, size_t n0, const char* name) {
    if (v.extent(0) < n0) v = std::decay_t<decltype(v)>(std::string(name), grow(n0));
  };
  // Per-edge arrays of the reference backend's adjoint only: the fused kernels keep nothing per edge (56 B per edge
  // in float, times the edges per atom of the neighbour list incl. its skin, that the fused backend allocated and
  // zero-filled every step before session 8)
  if (backend_ != EdgeBackend::Fused) {
    need(edge_p_, n_edges, A, "bm_edge_p");
    need(edge_ds_, n_edges, A, "bm_edge_ds");
    need1(edge_grad_, n_edges, "bm_edge_grad");
  }
  need1(edge_recv_, n_edges, "bm_edge_recv");
  need1(send_offsets_, n_all + 1, "bm_send_offsets");
  need1(send_edges_, n_edges, "bm_send_edges");
  need1(send_fill_, n_all, "bm_send_fill");
}

template <class T, class ExecSpace>
template <class Fn>
void Model<T, ExecSpace>::with_fused_graph(int nl, int na, int n_edges, const Graph<ExecSpace>& graph, Fn fn) {
  kernels::Graph<T, ExecSpace> g;
  g.x = fused_->x;
  g.recv_offsets = graph.recv_offsets;
  g.edge_sender = graph.senders;
  g.edge_receiver = edge_recv_;
  g.send_offsets = send_offsets_;
  g.send_edges = send_edges_;
  g.n_recv = nl;
  g.n_total = na;
  g.n_edges = n_edges;
  g.n_send = n_send_;
  const int K = d_.K, C = d_.C;
  auto as3 = [&](FeatureView v, int n) {
    return Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), n, K, C);
  };
  model_detail::with_feature_degree(d_.L, [&](auto Lc) { fn(Lc, g, as3); });
}

// Team size of the fused kernels (the forward's where `forward`) for nl local atoms: ModelOptions::forward_team
// (forward) or interaction_team if set, else model_detail::automatic_fused_team (GPUs only; host back-ends: one
// thread per team).
template <class T, class ExecSpace>
int Model<T, ExecSpace>::fused_team_size(int nl, bool forward) const {
  if (forward && fused_->forward_team_size >= 0) return fused_->forward_team_size;
  if (fused_->team_size > 0 || kernels::runs_on_host<ExecSpace>) return fused_->team_size;
  return model_detail::automatic_fused_team(nl, d_.C, forward, model_detail::few_atoms_rule_for<T>);
}

template <class T, class ExecSpace>
std::string Model<T, ExecSpace>::launch_summary(int nl) const {
  const std::string options = non_default_options(options_);
  const std::string options_note = options.empty() ? "" : "; options: " + options;
  if (backend_ != EdgeBackend::Fused) return "reference edge kernels (per-edge arrays)" + options_note;
  auto one = [](int team, int chunk, int basis, bool tc, bool capped) {
    std::string d = std::to_string(team) + (team == 1 ? " thread" : " threads");
    d += chunk > 0 ? " (radial chunk " + std::to_string(chunk) + ", basis chunk " + std::to_string(basis) +
                         (tc ? ", tensor cores" : "") + ")"
                   : " (radial mode 0)";
    return capped ? d + " capped" : d;
  };
  std::string s = "fused kernels for " + std::to_string(nl) + " local atoms, per atom:";
  for (int t = 0; t < d_.T_layers; ++t)
    with_layer_role(t, [&](auto role) {
      model_detail::with_feature_degree(d_.L, [&](auto Lc) {
        const auto r = model_detail::FusedLayer<T, ExecSpace, decltype(Lc)::value, decltype(role)::value>::launch(
            fused_->params[t], fused_team_size(nl, true), fused_team_size(nl), std::max(nl, 1));
        s += " layer " + std::to_string(t) + " forward " + one(r.team_fwd, r.chunk_fwd, r.basis_fwd, r.tc_fwd,
                                                                  r.capped_fwd) +
             ", adjoints " + one(r.team_adj, r.chunk_adj, r.basis_adj, r.tc_adj, r.capped_adj) +
             (t + 1 < d_.T_layers ? ";" : "");
      });
    });
  return s + options_note;
}

// Calls f(std::integral_constant<int, role>) with the role of layer t (FusedState::role).
template <class T, class ExecSpace>
template <class Fn>
void Model<T, ExecSpace>::with_layer_role(int t, Fn f) const {
  switch (fused_->role(t, d_.T_layers)) {
    case kernels::kEmbeddingInput: f(std::integral_constant<int, kernels::kEmbeddingInput>()); break;
    case kernels::kScalarOutput: f(std::integral_constant<int, kernels::kScalarOutput>()); break;
    default: f(std::integral_constant<int, kernels::kGeneralLayer>()); break;
  }
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::fused_forward_layer(int t, int nl, int na, int n_edges, const Graph<ExecSpace>& graph) {
  with_fused_graph(nl, na, n_edges, graph, [&](auto Lc, const auto& g, auto as3) {
    with_layer_role(t, [&](auto role) {
      model_detail::FusedLayer<T, ExecSpace, decltype(Lc)::value, decltype(role)::value>::forward(
          g, fused_->params[t], as3(h_[t], na), as3(m_[t], nl), as3(o_[t], nl), fused_->work[t],
          fused_team_size(nl, true));
    });
  });
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::fused_backward_layer(int t, int nl, int na, int n_edges, const Graph<ExecSpace>& graph,
                                               FeatureView dh_in) {
  with_fused_graph(nl, na, n_edges, graph, [&](auto Lc, const auto& g, auto as3) {
    // (layer 0 through the embedding-input kernels leaves dh_in as the node adjoint wrote it: nothing reads it)
    with_layer_role(t, [&](auto role) {
      model_detail::FusedLayer<T, ExecSpace, decltype(Lc)::value, decltype(role)::value>::backward(
          g, fused_->params[t], as3(h_[t], na), as3(o_[t], nl), as3(dm_, nl), as3(do_, nl), as3(dh_in, na),
          fused_->f, fused_->vatom, fused_->work[t], fused_team_size(nl));
    });
  });
}

template <class T, class ExecSpace>
void Model<T, ExecSpace>::compute(const Graph<ExecSpace>& graph, GhostExchange<T, ExecSpace>* exchange,
                                  Results<ExecSpace>& out) {
  using namespace model_detail;
  using Policy = Kokkos::RangePolicy<ExecSpace>;
  const int nl = graph.n_local, na = graph.n_all;
  int n_edges = graph.n_edges >= 0 ? graph.n_edges : 0;
  // The fused backend needs no exact count on the host (its kernels run over atoms): a bound sizes its edge arrays.
  const bool need_count = graph.n_edges < 0 || (graph.n_edges_is_bound && backend_ != EdgeBackend::Fused);
  if (need_count) {  // one value: the edge count is the last receiver offset
    n_edges = 0;
    if (nl > 0)
      n_edges = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Kokkos::subview(graph.recv_offsets, nl))();
  }
  n_edges_ = n_edges;
  if (na > nl && !exchange && d_.T_layers > 1)
    throw std::runtime_error("Batmobile model: ghost atoms with more than one layer need a GhostExchange");
  ensure_capacity(nl, na, n_edges);
  const auto md = d_;
  const int K = md.K, C = md.C, KC = K * C, L = md.L, A = md.A, dk = md.dk, AD = A * dk, P = md.P;
  const int CperA = C / A;
  const T inv_sqrt_dk = T(1) / Kokkos::Experimental::sqrt(T(dk));
  // Node (per-atom) kernels: a team per atom; on GPUs kNodeTeam threads share its (component, channel) items,
  // on host back-ends one thread per team.
  using TeamMember = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using ScratchT = Kokkos::View<T*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const int node_team = node_team_;
  // per-atom work over tens of items (an atom's edges, the readout's hidden units): a warp per atom is plenty
  const int warp_team = std::min(node_team, 32);
  auto node_policy = [node_team](int n, size_t bytes) {
    return Kokkos::TeamPolicy<ExecSpace>(n, node_team).set_scratch_size(0, Kokkos::PerTeam(bytes));
  };
  // node kernels: a team per block of nba atoms (node_atoms_ <= kNodeAtoms); team scratch for the block's rows,
  // kNodeAtoms wide ([feature][atom]), plus alignment
  const int nba = node_atoms_ > 0 ? node_atoms_ : auto_node_atoms(nl, kernels::multiprocessor_count<ExecSpace>(), kNodeAtoms),
            node_blocks = (nl + nba - 1) / nba, LCs = std::max(1, L * C);
  // (forward: m and o, activations, update, gates, RMS; adjoint: dE/dh, update, da, dz, gates, norm coefficients)
  const size_t node_scratch = sizeof(T) * kNodeAtoms * (4 * KC + LCs + kMaxL + 1) + 64;
  auto x = graph.x;
  auto species = graph.species;
  auto roff = graph.recv_offsets;
  auto snd = graph.senders;
  // Sender lists grouped by local atom and its periodic images where the exchange names them (fused backend only:
  // the reference adjoint takes each edge's sender row as it is)
  Kokkos::View<const int*, ExecSpace> image_owner;
  if (backend_ == EdgeBackend::Fused && exchange && na > nl) {
    image_owner = exchange->image_owners();
    if (image_owner.extent(0) != static_cast<size_t>(na - nl)) image_owner = {};
  }
  n_send_ = image_owner.extent(0) > 0 ? nl : -1;
  // The sender-grouped edge lists (the adjoint alone reads them). Where the caller vouches for the sender indices
  // (LAMMPS's neighbour lists) they are built just before the adjoint: on GPUs the forward's first kernel then starts
  // five small launches earlier and these run behind its kernels. Otherwise here, with the range check, before any
  // kernel reads h through a sender index.
  // Built late with the fused backend, its offsets are zeroed by the forward's first kernel (one launch less).
  const bool offsets_zeroed_early = backend_ == EdgeBackend::Fused && graph.senders_in_range && na > 0;
  auto build_csr = [&] {
    build_sender_csr<ExecSpace>(nl, na, roff, snd, edge_recv_, send_offsets_, send_edges_, send_fill_, warp_team,
                                !graph.senders_in_range, 1024, image_owner, offsets_zeroed_early);
  };
  if (!graph.senders_in_range) build_csr();
  auto erecv = edge_recv_;
  auto soff = send_offsets_;
  auto sedge = send_edges_;

  const bool fused = backend_ == EdgeBackend::Fused;
  // Reference backend: keep each edge's radial-MLP output (2PC values per layer) from the forward pass for the
  // two adjoint passes when that fits in kRadialCacheBytes; otherwise recompute it (3 evaluations per edge).
  const double rcache_bytes = double(d_.T_layers) * n_edges * 2.0 * d_.P * d_.C * sizeof(T);
  const double cap = options_.radial_cache_mb * 1024.0 * 1024.0;
  const bool use_rcache = !fused && n_edges > 0 && rcache_bytes <= cap;
  if (use_rcache) {
    rcache_.resize(d_.T_layers);
    for (auto& v : rcache_)
      if (v.extent(0) < static_cast<size_t>(n_edges) || v.extent(1) != static_cast<size_t>(2 * d_.P * d_.C))
        v = std::decay_t<decltype(v)>("bm_radial_cache", n_edges + n_edges / 5 + 16, 2 * d_.P * d_.C);
  }
  if (fused) {
    auto& F = *fused_;
    if (F.x.extent(0) < static_cast<size_t>(na)) {
      const size_t cap = na + na / 5 + 16;
      F.x = decltype(F.x)("bm_xT", cap);
      F.f = decltype(F.f)("bm_fused_f", cap, 3);
      F.vatom = decltype(F.vatom)("bm_fused_vatom", cap, 6);
      F.f_send = decltype(F.f)("bm_fused_f_send", cap, 3);
      F.vatom_send = decltype(F.vatom)("bm_fused_vatom_send", cap, 6);
      for (auto& w : F.work) w.f_send = F.f_send, w.vatom_send = F.vatom_send;
    }
  }

  // Embedding (owned and ghost atoms alike: it depends only on the species). Fused backend, in the same launch:
  // positions in T, the accumulators zeroed, and the sender offsets zeroed where the sender lists are built later
  // (one launch instead of seven)
  {
    auto h0 = h_[0];
    decltype(fused_->x) xT;
    decltype(fused_->f) f0, fs0;
    decltype(fused_->vatom) v0, vs0;
    if (fused) xT = fused_->x, f0 = fused_->f, fs0 = fused_->f_send, v0 = fused_->vatom, vs0 = fused_->vatom_send;
    const bool zero_soff = offsets_zeroed_early;
    // layer 0's q and k per species (FusedState::species_q): sized here, written below, not projected again
    const bool species_qk = fused && fused_->species_q.data() != nullptr;
    decltype(fused_->species_q) q0, k0, tq, tk;
    if (species_qk) {
      auto& w0 = fused_->work[0];
      w0.resize(nl, na, A, dk);
      w0.qk_given = true;
      q0 = w0.q, k0 = w0.k, tq = fused_->species_q, tk = fused_->species_k;
    }
    // one thread per feature (consecutive threads write consecutive addresses; a thread per atom wrote rows KC apart)
    kernels::parallel_for_queued(
        "bm_embed", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, int64_t(na) * KC),
        KOKKOS_LAMBDA(int64_t xf) {
          const int n = int(xf / KC), f = int(xf % KC), s = f < C ? species(n) : -1;
          h0(n, f) = s >= 0 ? md.w(md.o_embed + s * C + f) : T(0);
          if (species_qk && f < AD) {
            const int sp = species(n);  // (no model species: a zero embedding, whose projections are 0)
            k0(n, f) = sp >= 0 ? tk(sp, f) : T(0);
            if (n < nl) q0(n, f) = sp >= 0 ? tq(sp, f) : T(0);
          }
          if (f != 0 || !fused) return;
          for (int a = 0; a < 3; ++a) xT(n, a) = T(x(n, a)), f0(n, a) = 0, fs0(n, a) = 0;
          for (int a = 0; a < 6; ++a) v0(n, a) = 0, vs0(n, a) = 0;
          if (zero_soff) {
            soff(n) = 0;
            if (n == 0) soff(na) = 0;
          }
        });
  }

  // ------------------------------------------------------------------ forward
  for (int t = 0; t < md.T_layers; ++t) {
    const int lb = md.layer_base + t * md.layer_size;
    auto h = h_[t];
    auto hn = h_[t + 1];
    auto mv = m_[t];
    auto ov = o_[t];
    auto zv = z_[t];
    auto hpv = hp_[t];
    auto gamv = gam_[t];
    auto rmsv = rms_[t];
    auto qv = q_[t];
    auto kv = k_[t];
    auto smax = smax_[t];
    auto zsum = zsum_[t];
    auto rcache = use_rcache ? rcache_[t] : Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>();
    if (fused) {
      fused_forward_layer(t, nl, na, n_edges, graph);
    } else {
    Kokkos::parallel_for(
        "bm_qk", Policy(0, na), KOKKOS_LAMBDA(int n) {
          for (int r = 0; r < AD; ++r) {
            T ak = 0, aq = 0;
            for (int c = 0; c < C; ++c) {
              ak += md.w(lb + md.o_Wk + r * C + c) * h(n, c);
              aq += md.w(lb + md.o_Wq + r * C + c) * h(n, c);
            }
            kv(n, r) = ak;
            if (n < nl) qv(n, r) = aq;
          }
        });
    Kokkos::parallel_for(
        "bm_layer_forward", Policy(0, nl), KOKKOS_LAMBDA(int i) {
          const double xi[3] = {x(i, 0), x(i, 1), x(i, 2)};
          T M[kMaxHeads], Z[kMaxHeads];
          for (int a = 0; a < A; ++a) M[a] = -1e30, Z[a] = 0;
          EdgeGeom<T> g;
          // pass 1: per-head maximum of s + log u over the edges with u > 0 (u rounds to <= 0 next to r_c)
          for (int e = roff(i); e < roff(i + 1); ++e) {
            const int j = snd(e);
            const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
            edge_geometry<T>(md, xi, xj, false, g);
            if (!(g.env > T(0))) continue;
            const T log_env = Kokkos::Experimental::log(g.env);
            for (int a = 0; a < A; ++a) {
              T s = 0;
              for (int q = 0; q < dk; ++q) s += qv(i, a * dk + q) * kv(j, a * dk + q);
              s *= inv_sqrt_dk;
              for (int n = 0; n < md.NB; ++n) s += md.w(lb + md.o_Wg + a * md.NB + n) * g.B[n];
              if (s + log_env > M[a]) M[a] = s + log_env;
            }
          }
          // pass 2: message and attention sums
          T macc[kMaxK * kMaxC], oacc[kMaxK * kMaxC], V[kMaxK * kMaxC];
          T a1[kMaxH], R0[2 * kMaxPaths * kMaxC];
          for (int x_ = 0; x_ < KC; ++x_) macc[x_] = 0, oacc[x_] = 0;
          for (int e = roff(i); e < roff(i + 1); ++e) {
            const int j = snd(e);
            const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
            edge_geometry<T>(md, xi, xj, false, g);
            radial_mlp<T>(md, lb, g.B, a1, R0);
            if (use_rcache)
              for (int o = 0; o < 2 * P * C; ++o) rcache(e, o) = R0[o];
            const T* hj = &h(j, 0);
            tensor_product<T>(md, hj, R0, g.env, g.Y, macc);
            for (int x_ = 0; x_ < KC; ++x_) V[x_] = 0;
            tensor_product<T>(md, hj, R0 + P * C, g.env, g.Y, V);
            T ex[kMaxHeads];
            for (int a = 0; a < A; ++a) {
              T s = 0;
              for (int q = 0; q < dk; ++q) s += qv(i, a * dk + q) * kv(j, a * dk + q);
              s *= inv_sqrt_dk;
              for (int n = 0; n < md.NB; ++n) s += md.w(lb + md.o_Wg + a * md.NB + n) * g.B[n];
              // e = exp(s + log u - M): the max edge has weight 1, so Z >= 1 (o does not depend on M)
              ex[a] = g.env > T(0) ? Kokkos::Experimental::exp(s + Kokkos::Experimental::log(g.env) - M[a]) : T(0);
              Z[a] += ex[a];
            }
            for (int k = 0; k < K; ++k)
              for (int c = 0; c < C; ++c) oacc[k * C + c] += ex[c / CperA] * V[k * C + c];
          }
          for (int a = 0; a < A; ++a) smax(i, a) = M[a], zsum(i, a) = Z[a];
          for (int k = 0; k < K; ++k)
            for (int c = 0; c < C; ++c) {
              mv(i, k * C + c) = macc[k * C + c] * md.inv_avg;
              ov(i, k * C + c) = Z[c / CperA] > T(0) ? oacc[k * C + c] / Z[c / CperA] : T(0);
            }
        });
    }
    // Node update of the owned atoms: a team per block of nba atoms (node_atoms_), threads over (component,
    // channel) items, stages separated by team barriers (gates before gated activations, activations before the
    // update, the update before its RMS norm). Each item reads a weight once for all atoms of the block, whose m, o,
    // activations and updates live in team scratch ([feature][atom], block_row): the weights had been read once per
    // atom, and each with the latency of its own load.
    // degrees the update computes: all, or l = 0 alone for the last layer (FusedState::update_lmax)
    const int Lt = fused ? fused_->update_lmax(t, md.T_layers, L) : L, Kt = (Lt + 1) * (Lt + 1), KCt = Kt * C;
    kernels::parallel_for_queued(
        "bm_layer_node_forward", node_policy(node_blocks, node_scratch), KOKKOS_LAMBDA(const TeamMember& team) {
          const int i0 = team.league_rank() * nba, nb = nl - i0 < nba ? nl - i0 : nba;
          constexpr int NA = kNodeAtoms;
          T* mo = static_cast<T*>(team.team_scratch(0).get_shmem_aligned(node_scratch - 64, 64));  // (2 KC, NA)
          T* act = mo + 2 * KC * NA;                                                             // (KC, NA)
          T* hps = act + KC * NA;                                                                // (KC, NA)
          T* gs = hps + KC * NA;                                                                 // (L C, NA)
          T* rs = gs + LCs * NA;                                                                 // (L + 1, NA)
          const T* w = md.w.data() + lb;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, 2 * KCt * NA), [&](int n) {
            const int a = n % NA, r = n / NA, x_ = r < KCt ? r : KC + r - KCt;  // m rows, then o rows, < KCt each
            mo[x_ * NA + a] = a >= nb ? T(0) : x_ < KC ? mv(i0 + a, x_) : ov(i0 + a, x_ - KC);
          });
          team.team_barrier();
          // scalar mix + SiLU, and the gate pre-activations of l >= 1
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C + Lt * C), [&](int n) {
            const int o = n < C ? n : n - C;
            // transposed weights (in, out): element (o, c) at c * rows + o
            const int oW = n < C ? md.o_Wm0t : md.o_Wgmt, oV = n < C ? md.o_Wo0t : md.o_Wgot, rows = n < C ? C : L * C;
            T z[NA];
            for (int a = 0; a < NA; ++a) z[a] = w[(n < C ? md.o_b0 : md.o_bg) + o];
            block_fma(w + oW + o, rows, mo, C, z);
            block_fma(w + oV + o, rows, mo + KC * NA, C, z);
            for (int a = 0; a < NA; ++a) {
              if (n < C) {
                if (a < nb) zv(i0 + a, o) = z[a];
                act[o * NA + a] = silu(z[a]);
              } else {
                if (a < nb) gamv(i0 + a, o) = z[a];
                gs[o * NA + a] = z[a];
              }
            }
          });
          team.team_barrier();
          // equivariant mixes of l >= 1, gated
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, (Kt - 1) * C), [&](int n) {
            const int k = 1 + n / C, o = n % C, l = degree_of(k);
            T zz[NA];
            for (int a = 0; a < NA; ++a) zz[a] = 0;
            block_fma(w + md.o_Wmt[l] + o, C, mo + k * C * NA, C, zz);
            block_fma(w + md.o_Wot[l] + o, C, mo + (KC + k * C) * NA, C, zz);
            for (int a = 0; a < NA; ++a) {
              if (a < nb) zv(i0 + a, k * C + o) = zz[a];
              act[(k * C + o) * NA + a] = zz[a] * sigmoid(gs[((l - 1) * C + o) * NA + a]);
            }
          });
          team.team_barrier();
          // update + residual
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KCt), [&](int n) {
            const int k = n / C, o = n % C, l = degree_of(k);
            T v[NA];
            for (int a = 0; a < NA; ++a) v[a] = a < nb ? h(i0 + a, n) : T(0);
            block_fma(w + md.o_Wut[l] + o, C, act + k * C * NA, C, v);
            for (int a = 0; a < NA; ++a) {
              if (a < nb) hpv(i0 + a, n) = v[a];
              hps[n * NA + a] = v[a];
            }
          });
          team.team_barrier();
          // RMS norm per atom and degree l: one thread per (atom, l) sums its (2l + 1) C squares
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nb * (Lt + 1)), [&](int n) {
            const int a = n / (Lt + 1), l = n % (Lt + 1);
            T ss = 0;
            for (int x_ = l * l * C; x_ < (l + 1) * (l + 1) * C; ++x_) ss += hps[x_ * NA + a] * hps[x_ * NA + a];
            const T rms = Kokkos::Experimental::sqrt(ss / T((2 * l + 1) * C) + T(kNormEps));
            rmsv(i0 + a, l) = rms;
            rs[l * NA + a] = rms;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nb * KCt), [&](int n) {
            const int a = n / KCt, x_ = n % KCt, l = degree_of(x_ / C);
            hn(i0 + a, x_) = hps[x_ * NA + a] * w[md.o_gn[l] + x_ % C] / rs[l * NA + a];
          });
        });
    // Ghost features of the last layer's output are never read (the readout is per local atom), so the
    // exchange after it is skipped. Every rank takes the same branch: the LAMMPS exchange is collective.
    if (exchange && t + 1 < md.T_layers) exchange->forward(hn);
  }

  // ------------------------------------------------------------------ readout and its adjoint
  auto hT = h_[md.T_layers];
  auto dh = dh_;          // adjoint w.r.t. the output of the current layer
  auto dhin = dh_prev_;  // adjoint w.r.t. its input; the two swap roles after each layer
  if (sums_.data() == nullptr) sums_ = decltype(sums_)("bm_sums");
  // reductions into device memory: the host waits for them only where out.want_energy / want_virial ask (LAMMPS
  // needs energy and virial on thermo steps only)
  const Kokkos::View<double, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> energy_d(sums_.data());
  const Kokkos::View<model_detail::V6, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> virial_d(
      reinterpret_cast<model_detail::V6*>(sums_.data() + 1));
  // the wanted sums to the host, one copy for both (at the end: the virial's reduction runs last)
  auto fetch_wanted = [&] {
    if (!out.want_energy && !out.want_virial) return;
    double h[7];
    Kokkos::deep_copy(Kokkos::View<double[7], Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(h), sums_);
    if (out.want_energy) out.energy = h[0];
    if (out.want_virial)
      for (int a = 0; a < 6; ++a) out.virial[a] = h[1 + a];
  };
  out.energy = 0;
  for (int a = 0; a < 6; ++a) out.virial[a] = 0;
  const bool want_eatom = out.eatom.extent(0) >= static_cast<size_t>(nl) && nl > 0;
  auto eatom = out.eatom;
  // Zero fill of the ghost rows of a layer-input adjoint (the node adjoint writes the owned rows whole before the
  // edge kernels add to them). One thread per value, on the execution space: Kokkos 3.4's deep_copy(view, value)
  // fences before and after, and its fill of whole (n_all, KC) arrays took ~490 us at ~1e5 atoms on the H200.
  auto zero_ghost_rows = [nl, na, KC](const FeatureView& v) {
    if (na <= nl) return;
    T* p = v.data();
    Kokkos::parallel_for(
        "bm_zero_ghost_rows", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(int64_t(nl) * KC, int64_t(na) * KC),
        KOKKOS_LAMBDA(int64_t x) { p[x] = T(0); });
  };
  // a team per atom (a warp on GPUs): threads over the Hr hidden units, then over the C channels of dE/dh
  kernels::parallel_reduce_queued(
      "bm_readout",
      Kokkos::TeamPolicy<ExecSpace>(nl, warp_team).set_scratch_size(0, Kokkos::PerTeam(ScratchT::shmem_size(md.Hr))),
      KOKKOS_LAMBDA(const TeamMember& team, double& esum) {
        const int i = team.league_rank();
        const int s = species(i);
        // dE/dh of the readout: whole rows (only l = 0 is non-zero), so that dh needs no zero fill
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C, KC), [&](int x_) { dh(i, x_) = T(0); });
        if (s < 0) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) { dh(i, c) = T(0); });
          if (want_eatom && team.team_rank() == 0) eatom(i) = 0;
          return;
        }
        ScratchT dpre(team.team_scratch(0), md.Hr);  // dE/d(hidden pre-activation)
        T e = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, md.Hr),
            [&](int r, T& acc) {
              T a = md.w(md.o_rb1 + r);
              for (int c = 0; c < C; ++c) a += md.w(md.o_rW1t + c * md.Hr + r) * hT(i, c);
              acc += md.w(md.o_rw2 + r) * silu(a);
              dpre(r) = md.energy_scale * md.w(md.o_rw2 + r) * silu_grad(a);
            },
            e);
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) {
          T acc = 0;
          for (int r = 0; r < md.Hr; ++r) acc += md.w(md.o_rW1 + r * C + c) * dpre(r);
          dh(i, c) = acc;
        });
        if (team.team_rank() == 0) {  // one contribution per atom
          const double Ei = double(md.energy_scale) * double(md.w(md.o_rb2) + e) + md.E_ref(s);
          if (want_eatom) eatom(i) = Ei;
          esum += Ei;
        }
      },
      energy_d);

  // ------------------------------------------------------------------ adjoint, layer by layer
  if (graph.senders_in_range) build_csr();
  auto egrad = edge_grad_;
  if (!fused) Kokkos::deep_copy(egrad, 0.0);
  auto dmv = dm_;
  auto dov = do_;
  auto obar = obar_;
  auto ep = edge_p_;
  auto eds = edge_ds_;
  for (int t = md.T_layers - 1; t >= 0; --t) {
    const int lb = md.layer_base + t * md.layer_size;
    auto h = h_[t];
    auto mv = m_[t];
    auto ov = o_[t];
    auto zv = z_[t];
    auto hpv = hp_[t];
    auto gamv = gam_[t];
    auto rmsv = rms_[t];
    auto qv = q_[t];
    auto kv = k_[t];
    auto smax = smax_[t];
    auto zsum = zsum_[t];
    auto rcache = use_rcache ? rcache_[t] : Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>();
    // (layer 0 through the embedding-input kernels writes no input adjoint: nothing reads it; with sender groups,
    // n_send_ >= 0, no kernel writes or reads the ghost rows of an input adjoint: the images' dE/dh is on their
    // atom's row, so neither this fill nor the ghost reverse below is needed)
    if (!(fused && t == 0 && fused_->role(0, md.T_layers) == kernels::kEmbeddingInput) && n_send_ < 0)
      zero_ghost_rows(dhin);
    // (a) node ops: norm, update, gate, mix -> dh (residual), dm, do, Obar; a team per block of nba atoms, as in
    // the forward (each weight read once for the block; the atoms' rows in team scratch, [feature][atom])
    // degrees of the update's adjoint: as in the forward (FusedState::update_lmax); the input adjoint's l >= 1 rows
    // are then written 0 (the fused adjoint adds to them)
    const int Lt = fused ? fused_->update_lmax(t, md.T_layers, L) : L, KCt = (Lt + 1) * (Lt + 1) * C;
    kernels::parallel_for_queued(
        "bm_node_adjoint", node_policy(node_blocks, node_scratch), KOKKOS_LAMBDA(const TeamMember& team) {
          const int i0 = team.league_rank() * nba, nb = nl - i0 < nba ? nl - i0 : nba;
          constexpr int NA = kNodeAtoms;
          // dhp: dE/dh, then in place dE/d(update output); hps: the update's output, later dE/do (reference backend)
          T* dhp = static_cast<T*>(team.team_scratch(0).get_shmem_aligned(node_scratch - 64, 64));  // (KC, NA)
          T* hps = dhp + KC * NA;                                                                        // (KC, NA)
          T* da = hps + KC * NA;                                                                         // (KC, NA)
          T* dz = da + KC * NA;                                                                          // (KC, NA)
          T* dgam = dz + KC * NA;                                                                        // (L C, NA)
          T* coef = dgam + LCs * NA;                                                                     // (L + 1, NA)
          const T* w = md.w.data() + lb;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KCt * NA), [&](int n) {
            const int a = n % NA, x_ = n / NA;
            dhp[n] = a < nb ? dh(i0 + a, x_) : T(0);
            hps[n] = a < nb ? hpv(i0 + a, x_) : T(0);
          });
          team.team_barrier();
          // RMS norm, per atom and degree l: one thread per (atom, l)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nb * (Lt + 1)), [&](int n) {
            const int a = n / (Lt + 1), l = n % (Lt + 1);
            const T rms = rmsv(i0 + a, l);
            T dot = 0;
            for (int x_ = l * l * C; x_ < (l + 1) * (l + 1) * C; ++x_)
              dot += dhp[x_ * NA + a] * w[md.o_gn[l] + x_ % C] * hps[x_ * NA + a];
            coef[l * NA + a] = dot / (T((2 * l + 1) * C) * rms * rms * rms);
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nb * KC), [&](int n) {
            const int a = n / KC, x_ = n % KC, l = degree_of(x_ / C);
            if (x_ >= KCt) {  // degrees the update skipped: their adjoint is 0
              dhin(i0 + a, x_) = T(0);
              return;
            }
            const T v = w[md.o_gn[l] + x_ % C] * dhp[x_ * NA + a] / rmsv(i0 + a, l) - hps[x_ * NA + a] * coef[l * NA + a];
            dhp[x_ * NA + a] = v;
            dhin(i0 + a, x_) = v;  // residual
          });
          team.team_barrier();
          // update -> activations -> mix outputs (SiLU for l = 0, gated for l >= 1)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KCt), [&](int n) {
            const int k = n / C, c = n % C, l = degree_of(k);
            T acc[NA];
            for (int a = 0; a < NA; ++a) acc[a] = 0;
            block_fma(w + md.o_Wu[l] + c, C, dhp + k * C * NA, C, acc);
            for (int a = 0; a < NA; ++a) {
              da[n * NA + a] = acc[a];
              dz[n * NA + a] = a >= nb   ? T(0)
                               : k == 0 ? acc[a] * silu_grad(zv(i0 + a, c))
                                        : acc[a] * sigmoid(gamv(i0 + a, (l - 1) * C + c));
            }
          });
          team.team_barrier();
          // gate pre-activations
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Lt * C * NA), [&](int n) {
            const int a = n % NA, lc = n / NA, l = 1 + lc / C, c = lc % C;
            T g = 0;
            if (a < nb) {
              const T sg = sigmoid(gamv(i0 + a, lc));
              T acc = 0;
              for (int k = l * l; k < (l + 1) * (l + 1); ++k) acc += da[(k * C + c) * NA + a] * zv(i0 + a, k * C + c);
              g = acc * sg * (T(1) - sg);
            }
            dgam[n] = g;
          });
          team.team_barrier();
          // mixes -> dE/dm, dE/do (their l >= 1 rows unset where the update skipped them: nothing reads them)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KCt), [&](int n) {
            const int k = n / C, c = n % C, l = degree_of(k);
            T am[NA], ao[NA];
            for (int a = 0; a < NA; ++a) am[a] = ao[a] = 0;
            const int oM = k == 0 ? md.o_Wm0 : md.o_Wm[l], oO = k == 0 ? md.o_Wo0 : md.o_Wo[l];
            block_fma2(w + oM + c, w + oO + c, C, dz + k * C * NA, C, am, ao);
            if (k == 0 && Lt > 0) block_fma2(w + md.o_Wgm + c, w + md.o_Wgo + c, C, dgam, L * C, am, ao);
            for (int a = 0; a < nb; ++a) {
              dmv(i0 + a, n) = am[a];
              dov(i0 + a, n) = ao[a];
              hps[n * NA + a] = ao[a];  // (the update's output is no longer read)
            }
          });
          if (fused) return;  // the fused kernels do not read obar
          team.team_barrier();
          // per-head dE/do . o (the softmax adjoint of the reference backend uses it)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nb * A), [&](int n) {
            const int a = n / A, hd = n % A;
            T acc = 0;
            for (int k = 0; k < K; ++k)
              for (int c = hd * CperA; c < (hd + 1) * CperA; ++c) acc += hps[(k * C + c) * NA + a] * ov(i0 + a, k * C + c);
            obar(i0 + a, hd) = acc;
          });
        });
    if (fused) {
      fused_backward_layer(t, nl, na, n_edges, graph, dhin);
    } else {
    // (b) per receiver: edge geometry adjoint (dE/dr per edge), query adjoint; saves P and dE/ds per edge
    Kokkos::parallel_for(
        "bm_edge_adjoint_receiver", Policy(0, nl), KOKKOS_LAMBDA(int i) {
          const double xi[3] = {x(i, 0), x(i, 1), x(i, 2)};
          T dq[kMaxAttnWidth];
          for (int r = 0; r < AD; ++r) dq[r] = 0;
          EdgeGeom<T> g;
          T a1[kMaxH], R0[2 * kMaxPaths * kMaxC], dR[2 * kMaxPaths * kMaxC], V[kMaxK * kMaxC];
          T dY[kMaxK], dYdu[kMaxK][3];
          for (int e = roff(i); e < roff(i + 1); ++e) {
            const int j = snd(e);
            const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
            edge_geometry<T>(md, xi, xj, true, g);
            const T* R0p = radial_outputs<T>(md, lb, g.B, a1, R0, use_rcache, rcache, e);
            const T* hj = &h(j, 0);
            for (int x_ = 0; x_ < KC; ++x_) V[x_] = 0;
            tensor_product<T>(md, hj, R0p + P * C, g.env, g.Y, V);
            T Pa[kMaxHeads], ds[kMaxHeads], du = 0;
            for (int a = 0; a < A; ++a) {
              T s = 0;
              for (int q = 0; q < dk; ++q) s += qv(i, a * dk + q) * kv(j, a * dk + q);
              s *= inv_sqrt_dk;
              for (int n = 0; n < md.NB; ++n) s += md.w(lb + md.o_Wg + a * md.NB + n) * g.B[n];
              const bool inside = g.env > T(0);
              const T ex = inside ? Kokkos::Experimental::exp(s + Kokkos::Experimental::log(g.env) - smax(i, a)) : T(0);
              const T denom = zsum(i, a) > T(0) ? zsum(i, a) : T(1);
              Pa[a] = ex / denom;
              T D = 0;
              for (int k = 0; k < K; ++k)
                for (int c = a * CperA; c < (a + 1) * CperA; ++c) D += dov(i, k * C + c) * V[k * C + c];
              const T dEde = (D - obar(i, a)) / denom;
              ds[a] = dEde * ex;                    // de/ds = e; M is a constant shift: no gradient
              if (inside) du += dEde * ex / g.env;  // de/du = e / u
              ep(e, a) = Pa[a];
              eds(e, a) = ds[a];
              for (int q = 0; q < dk; ++q) dq[a * dk + q] += ds[a] * kv(j, a * dk + q) * inv_sqrt_dk;
            }
            // tensor-product adjoints w.r.t. the path weights and the spherical harmonics
            for (int x_ = 0; x_ < 2 * P * C; ++x_) dR[x_] = 0;
            for (int k = 0; k < K; ++k) dY[k] = 0;
            for (int n = 0; n < md.nnz; ++n) {
              const int k1 = md.cg_k1(n), k2 = md.cg_k2(n), k3 = md.cg_k3(n), p = md.cg_path(n);
              const T cf = md.cg_coef(n), cy = cf * g.Y[k2];
              T ydot = 0;
              for (int c = 0; c < C; ++c) {
                const T hy = hj[k1 * C + c];
                const T gm = dmv(i, k3 * C + c) * md.inv_avg;
                const T go = Pa[c / CperA] * dov(i, k3 * C + c);
                dR[p * C + c] += cy * hy * gm;
                dR[P * C + p * C + c] += cy * hy * go;
                ydot += hy * (R0p[p * C + c] * gm + R0p[P * C + p * C + c] * go);
              }
              dY[k2] += cf * g.env * ydot;
            }
            // radial adjoint: R = env * W2 silu(W1 B + b1)
            T ds1[kMaxH];
            for (int hh = 0; hh < md.H; ++hh) ds1[hh] = 0;
            for (int o = 0; o < 2 * P * C; ++o) {
              du += dR[o] * R0p[o];
              const T gr = dR[o] * g.env;
              for (int hh = 0; hh < md.H; ++hh) ds1[hh] += md.w(lb + md.o_W2 + o * md.H + hh) * gr;
            }
            T dB[kMaxNB];
            for (int n = 0; n < md.NB; ++n) {
              T acc = 0;
              for (int a = 0; a < A; ++a) acc += md.w(lb + md.o_Wg + a * md.NB + n) * ds[a];
              dB[n] = acc;
            }
            for (int hh = 0; hh < md.H; ++hh) {
              const T da1 = ds1[hh] * silu_grad(a1[hh]);
              for (int n = 0; n < md.NB; ++n) dB[n] += md.w(lb + md.o_W1 + hh * md.NB + n) * da1;
            }
            T dd = du * g.denv;
            for (int n = 0; n < md.NB; ++n) dd += dB[n] * g.dB[n];
            sh_gradient<T>(L, g.u_hat, dYdu);
            T G[3] = {0, 0, 0};
            for (int k = 0; k < K; ++k)
              for (int a = 0; a < 3; ++a) G[a] += dY[k] * dYdu[k][a];
            const T Gu = G[0] * g.u_hat[0] + G[1] * g.u_hat[1] + G[2] * g.u_hat[2];
            for (int a = 0; a < 3; ++a)
              egrad(e, a) += double(dd * g.u_hat[a] + (G[a] - Gu * g.u_hat[a]) / g.d);
          }
          for (int c = 0; c < C; ++c) {
            T acc = 0;
            for (int r = 0; r < AD; ++r) acc += md.w(lb + md.o_Wq + r * C + c) * dq[r];
            dhin(i, c) += acc;
          }
        });
    // (c) per sender (owned and ghost): gather of the feature adjoints, no atomics
    Kokkos::parallel_for(
        "bm_edge_adjoint_sender", Policy(0, na), KOKKOS_LAMBDA(int j) {
          if (soff(j) == soff(j + 1)) return;
          const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
          T acc[kMaxK * kMaxC], dkj[kMaxAttnWidth];
          for (int x_ = 0; x_ < KC; ++x_) acc[x_] = 0;
          for (int r = 0; r < AD; ++r) dkj[r] = 0;
          EdgeGeom<T> g;
          T a1[kMaxH], R0[2 * kMaxPaths * kMaxC];
          for (int q_ = soff(j); q_ < soff(j + 1); ++q_) {
            const int e = sedge(q_);
            const int i = erecv(e);
            const double xi[3] = {x(i, 0), x(i, 1), x(i, 2)};
            edge_geometry<T>(md, xi, xj, false, g);
            const T* R0p = radial_outputs<T>(md, lb, g.B, a1, R0, use_rcache, rcache, e);
            for (int n = 0; n < md.nnz; ++n) {
              const int k1 = md.cg_k1(n), k3 = md.cg_k3(n), p = md.cg_path(n);
              const T cy = md.cg_coef(n) * g.Y[md.cg_k2(n)] * g.env;
              for (int c = 0; c < C; ++c)
                acc[k1 * C + c] += cy * (R0p[p * C + c] * dmv(i, k3 * C + c) * md.inv_avg +
                                         R0p[P * C + p * C + c] * ep(e, c / CperA) * dov(i, k3 * C + c));
            }
            for (int a = 0; a < A; ++a)
              for (int q = 0; q < dk; ++q) dkj[a * dk + q] += eds(e, a) * qv(i, a * dk + q) * inv_sqrt_dk;
          }
          for (int x_ = 0; x_ < KC; ++x_) dhin(j, x_) += acc[x_];
          for (int c = 0; c < C; ++c) {
            T s = 0;
            for (int r = 0; r < AD; ++r) s += md.w(lb + md.o_Wk + r * C + c) * dkj[r];
            dhin(j, c) += s;
          }
        });
    }
    // Ghost rows of layer t's input are copies of owners' layer t-1 outputs: fold their adjoints.
    if (t > 0 && exchange && n_send_ < 0) exchange->reverse(dhin);
    std::swap(dh, dhin);  // layer t's input adjoint is layer t-1's output adjoint (no copy)
  }

  // ------------------------------------------------------------------ forces and virial from per-edge dE/dr
  auto f = out.f;
  if (f.extent(0) < static_cast<size_t>(na))
    throw std::runtime_error("Batmobile model: force view smaller than n_all");
  if (fused) {
    // the kernels accumulated forces and half of each edge tally onto both ends
    auto ff = fused_->f, ffs = fused_->f_send;
    auto fv = fused_->vatom, fvs = fused_->vatom_send;
    auto vatom = out.vatom;
    const bool want_vatom = vatom.extent(0) >= static_cast<size_t>(na) && na > 0;
    // Grouped senders put the images' terms on their atoms' rows and write no ghost row: those rows are written as
    // zeros without reading the accumulators, so that a caller may fold them or, like LAMMPS with newton off, leave
    // them
    const int n_own = n_send_ >= 0 ? nl : na;
    const bool add = out.add_forces;
    kernels::parallel_reduce_queued(
        "bm_fused_out", Policy(0, na),
        KOKKOS_LAMBDA(int n, model_detail::V6& acc) {
          if (n >= n_own) {
            if (!add)
              for (int a = 0; a < 3; ++a) f(n, a) = 0;
            if (want_vatom)
              for (int a = 0; a < 6; ++a) vatom(n, a) = 0;
            return;
          }
          for (int a = 0; a < 3; ++a) {
            const double fa = ff(n, a) + ffs(n, a);
            f(n, a) = add ? f(n, a) + fa : fa;
          }
          for (int a = 0; a < 6; ++a) {
            const double v = fv(n, a) + fvs(n, a);
            acc.v[a] += v;
            if (want_vatom) vatom(n, a) = v;
          }
        },
        virial_d);
    // (no fence: the caller's kernels run after these on the same instance, and a host copy of f waits for them)
    fetch_wanted();
    return;
  }
  const bool add = out.add_forces;
  Kokkos::parallel_for(
      "bm_forces", Policy(0, na), KOKKOS_LAMBDA(int n) {
        double F[3] = {0, 0, 0};
        if (n < nl)
          for (int e = roff(n); e < roff(n + 1); ++e)
            for (int a = 0; a < 3; ++a) F[a] += egrad(e, a);
        for (int q = soff(n); q < soff(n + 1); ++q)
          for (int a = 0; a < 3; ++a) F[a] -= egrad(sedge(q), a);
        for (int a = 0; a < 3; ++a) f(n, a) = add ? f(n, a) + F[a] : F[a];
      });
  // symmetrised edge tally -(r (x) g + g (x) r) / 2, g = dE/dr, in LAMMPS order xx yy zz xy xz yz
  Kokkos::parallel_reduce(
      "bm_virial", Policy(0, n_edges),
      KOKKOS_LAMBDA(int e, model_detail::V6& acc) {
        const int i = erecv(e), j = snd(e);
        double r[3];
        for (int a = 0; a < 3; ++a) r[a] = x(j, a) - x(i, a);
        acc.v[0] -= r[0] * egrad(e, 0);
        acc.v[1] -= r[1] * egrad(e, 1);
        acc.v[2] -= r[2] * egrad(e, 2);
        acc.v[3] -= 0.5 * (r[0] * egrad(e, 1) + r[1] * egrad(e, 0));
        acc.v[4] -= 0.5 * (r[0] * egrad(e, 2) + r[2] * egrad(e, 0));
        acc.v[5] -= 0.5 * (r[1] * egrad(e, 2) + r[2] * egrad(e, 1));
      },
      virial_d);
  fetch_wanted();
  auto vatom = out.vatom;
  if (vatom.extent(0) >= static_cast<size_t>(na) && na > 0) {
    Kokkos::parallel_for(
        "bm_vatom", Policy(0, na), KOKKOS_LAMBDA(int n) {
          double v[6] = {0, 0, 0, 0, 0, 0};
          auto tally = [&](int e) {
            const int i = erecv(e), j = snd(e);
            double r[3];
            for (int a = 0; a < 3; ++a) r[a] = x(j, a) - x(i, a);
            v[0] -= 0.5 * r[0] * egrad(e, 0);
            v[1] -= 0.5 * r[1] * egrad(e, 1);
            v[2] -= 0.5 * r[2] * egrad(e, 2);
            v[3] -= 0.25 * (r[0] * egrad(e, 1) + r[1] * egrad(e, 0));
            v[4] -= 0.25 * (r[0] * egrad(e, 2) + r[2] * egrad(e, 0));
            v[5] -= 0.25 * (r[1] * egrad(e, 2) + r[2] * egrad(e, 1));
          };
          if (n < nl)
            for (int e = roff(n); e < roff(n + 1); ++e) tally(e);
          for (int q = soff(n); q < soff(n + 1); ++q) tally(sedge(q));
          for (int a = 0; a < 6; ++a) vatom(n, a) = v[a];
        });
  }
  Kokkos::fence();
}

}  // namespace batmobile

// Explicit instantiation of the model in precision T on execution space S; one per translation unit
// (model_{device,host}_{float,double}.cpp), so that a parallel build compiles them side by side (nvcc took ~4 min
// for all four in one file).
#define BATMOBILE_INSTANTIATE_MODEL(T, S)                \
  namespace batmobile {                                  \
  template class IndexMapGhostExchange<T, S>;            \
  template class Model<T, S>;                            \
  }
