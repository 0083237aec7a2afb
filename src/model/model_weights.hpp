// The model's weights on the device (ModelData, model.hpp): the model file's tensors packed into one array with the
// transposed copies the kernels read, and the sparse Clebsch-Gordan table of its tensor products (docs/model.md).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/generated/cg_tables.hpp"
#include "model/model.hpp"

namespace batmobile {
namespace model_detail {

// md.w (globals, then one block of md.layer_size per layer) and md.E_ref from the file; md's sizes are set.
template <class T, class ExecSpace>
void pack_weights(const ModelFile& file, ModelData<T, ExecSpace>& md) {
  const ModelHyper& hp = file.hyper;
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
    if (hp.correlation == 2) {  // (the last layer: zeros of the same sizes, see ModelData)
      const bool present = hp.has_product(t);
      auto zeros = [&](size_t size) {
        const int off = static_cast<int>(host.size()) - base;
        host.resize(host.size() + size, 0.0);
        return off;
      };
      md.o_wq = present ? rel("product.wq") : zeros(static_cast<size_t>(count_symmetric_paths(L)) * C);
      for (int l = 0; l <= L; ++l) {
        const std::string n = "product.Wp" + std::to_string(l);
        md.o_Wp[l] = present ? rel(n) : zeros(size_t(C) * C);
        md.o_Wpt[l] = present ? transposed(n, C, C) : zeros(size_t(C) * C);
      }
    }
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

}

// One non-zero of a path's Clebsch-Gordan tensor: components k1 (l1, m1), k2 (l2, m2) -> k3 (l3, m3), the path's
// index in its set and its coefficient with the path factor sqrt((2 l3 + 1) / n(l3)) folded in (n(l3): the set's
// paths with that output degree; alpha_p for the tensor products, beta_q for the product basis).
struct CouplingEntry {
  int k1, k2, k3, path;
  double coef;
};

// The non-zeros of the natural-parity paths of degree <= L in docs/model.md path order; symmetric: only l1 <= l2
// (the product basis's paths).
inline std::vector<CouplingEntry> coupling_entries(int L, bool symmetric) {
  int n3[kMaxL + 1] = {};
  for (int l1 = 0; l1 <= L; ++l1)
    for (int l2 = symmetric ? l1 : 0; l2 <= L; ++l2)
      for (int l3 = 0; l3 <= L; ++l3) n3[l3] += is_natural_parity_path(l1, l2, l3);
  std::vector<CouplingEntry> entries;
  int p = 0;
  for (int l1 = 0; l1 <= L; ++l1)
    for (int l2 = symmetric ? l1 : 0; l2 <= L; ++l2)
      for (int l3 = 0; l3 <= L; ++l3) {
        if (!is_natural_parity_path(l1, l2, l3)) continue;
        const double factor = std::sqrt((2.0 * l3 + 1.0) / n3[l3]);
        bool found = false;
        for (const auto& pi : kernels::cg::kPaths) {
          if (pi.l1 != l1 || pi.l2 != l2 || pi.l3 != l3) continue;
          found = true;
          for (int e = pi.offset; e < pi.offset + pi.count; ++e) {
            const auto& en = kernels::cg::kEntries[e];
            entries.push_back({l1 * l1 + en.i1, l2 * l2 + en.i2, l3 * l3 + en.i3, p, factor * en.value});
          }
        }
        if (!found) throw std::runtime_error("CG table lacks a path");
        ++p;
      }
  return entries;
}

// A host vector as a device view of X.
template <class X, class ExecSpace, class Y>
Kokkos::View<X*, ExecSpace> to_device(const char* name, const std::vector<Y>& v) {
  Kokkos::View<X*, ExecSpace> dv(std::string(name), v.size());
  auto hv = Kokkos::create_mirror_view(dv);
  for (size_t i = 0; i < v.size(); ++i) hv(i) = X(v[i]);
  Kokkos::deep_copy(dv, hv);
  return dv;
}

// Sparse CG table for the natural-parity paths of degree <= md.L, in docs/model.md path order, alpha_p folded in.
template <class T, class ExecSpace>
void build_cg_table(ModelData<T, ExecSpace>& md) {
  const std::vector<CouplingEntry> entries = coupling_entries(md.L, false);
  if (entries.empty() || entries.back().path + 1 != md.P) throw std::runtime_error("path count mismatch");
  std::vector<int> k1, k2, k3, path;
  std::vector<double> coef;
  for (const auto& e : entries) {
    k1.push_back(e.k1);
    k2.push_back(e.k2);
    k3.push_back(e.k3);
    path.push_back(e.path);
    coef.push_back(e.coef);
  }
  md.nnz = static_cast<int>(coef.size());
  md.cg_k1 = to_device<int, ExecSpace>("bm_cg_k1", k1);
  md.cg_k2 = to_device<int, ExecSpace>("bm_cg_k2", k2);
  md.cg_k3 = to_device<int, ExecSpace>("bm_cg_k3", k3);
  md.cg_path = to_device<int, ExecSpace>("bm_cg_path", path);
  md.cg_coef = to_device<T, ExecSpace>("bm_cg_coef", coef);
}

// The product basis's CG tables (ModelData::prod_index, prod_coef): its symmetric paths q = (l1 <= l2, l3) in
// docs/model.md path order, beta_q folded into the coefficients.
template <class T, class ExecSpace>
void build_product_tables(ModelData<T, ExecSpace>& md) {
  const int K = md.K;
  // CSR tables: rows (key, x, y, q) grouped by key, appended to index (offsets, then the (x, y, q) rows) and coef
  std::vector<int> index;
  std::vector<double> coefs;
  auto append_csr = [&](const std::vector<std::array<int, 4>>& rows, const std::vector<double>& coef, int* offsets_at,
                        int* rows_at, int* coef_at) {
    std::vector<size_t> order(rows.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows[a][0] < rows[b][0]; });
    *offsets_at = static_cast<int>(index.size());
    std::vector<int> offsets(K + 1, 0);
    for (const auto& r : rows) ++offsets[r[0] + 1];
    for (int k = 0; k < K; ++k) offsets[k + 1] += offsets[k];
    index.insert(index.end(), offsets.begin(), offsets.end());
    *rows_at = static_cast<int>(index.size());
    *coef_at = static_cast<int>(coefs.size());
    for (size_t i : order) {
      index.insert(index.end(), {rows[i][1], rows[i][2], rows[i][3]});
      coefs.push_back(coef[i]);
    }
  };
  std::vector<std::array<int, 4>> fwd, adj;
  std::vector<double> fwd_coef, adj_coef;
  for (const auto& e : coupling_entries(md.L, true)) {
    fwd.push_back({e.k3, e.k1, e.k2, e.path});
    fwd_coef.push_back(e.coef);
    // d(m_k1 m_k2)/dm: the k2 factor for the k1 row and the k1 factor for the k2 row (both rows where k1 == k2)
    adj.push_back({e.k1, e.k2, e.k3, e.path});
    adj.push_back({e.k2, e.k1, e.k3, e.path});
    adj_coef.push_back(e.coef);
    adj_coef.push_back(e.coef);
  }
  int fwd_offsets = 0, fwd_coef_at = 0;  // (the forward's table comes first: offsets and coefficients from 0)
  append_csr(fwd, fwd_coef, &fwd_offsets, &md.prod_fwd_rows, &fwd_coef_at);
  append_csr(adj, adj_coef, &md.prod_adj_offsets, &md.prod_adj_rows, &md.prod_adj_coef);
  md.prod_index = to_device<int, ExecSpace>("bm_product_index", index);
  md.prod_coef = to_device<T, ExecSpace>("bm_product_coef", coefs);
}

template <class T, class ExecSpace>
ModelData<T, ExecSpace> load_model_data(const ModelFile& file) {
  const ModelHyper& hp = file.hyper;
  ModelData<T, ExecSpace> md;
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
  md.correlation = hp.correlation;
  pack_weights(file, md);
  build_cg_table(md);
  if (md.correlation == 2) build_product_tables(md);
  return md;
}

}  // namespace model_detail
}  // namespace batmobile
