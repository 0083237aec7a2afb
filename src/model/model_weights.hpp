// The model's weights on the device (ModelData, model.hpp): the model file's tensors packed into one array with the
// transposed copies the kernels read, and the sparse Clebsch-Gordan table of its tensor products (docs/model.md).
#pragma once
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

// Sparse CG table for the natural-parity paths of degree <= md.L, in docs/model.md path order, alpha_p folded in.
template <class T, class ExecSpace>
void build_cg_table(ModelData<T, ExecSpace>& md) {
  const int L = md.L, P = md.P;
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
  pack_weights(file, md);
  build_cg_table(md);
  return md;
}

}  // namespace model_detail
}  // namespace batmobile
