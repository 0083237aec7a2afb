// The adjoint stages of Model::compute that both edge backends share: each layer's node adjoint, and the fused
// backend's fold of its accumulated forces and virials into the results.
#pragma once
#include <Kokkos_Core.hpp>
#include <stdexcept>

#include "kernels/cuda_launch.hpp"
#include "model/device_math.hpp"
#include "model/fused_state.hpp"
#include "model/model_step.hpp"

namespace batmobile {
namespace model_detail {

// The product basis's adjoint for one (k, c) item n = k C + c of a node block: am[a] += dE/dm[k][c] through p, from the
// block's m rows and dE/dp rows in team scratch ([feature][atom]). w: the layer's weights.
template <class T, class ExecSpace>
KOKKOS_INLINE_FUNCTION void block_product_adjoint(const ModelData<T, ExecSpace>& md, const T* w, int n, const T* m,
                                                  const T* dp, T* am) {
  const int C = md.C, k = n / C, c = n % C;
  for (int e = md.prod_index(md.prod_adj_offsets + k); e < md.prod_index(md.prod_adj_offsets + k + 1); ++e) {
    const int* row = &md.prod_index(md.prod_adj_rows + 3 * e);  // (other factor, k3, q)
    const T s = md.prod_coef(md.prod_adj_coef + e) * w[md.o_wq + row[2] * C + c];
    const T* other = m + (row[0] * C + c) * kNodeAtoms;
    const T* g = dp + (row[1] * C + c) * kNodeAtoms;
    for (int a = 0; a < kNodeAtoms; ++a) am[a] += s * other[a] * g[a];
  }
}

// Node adjoint of layer t (norm, update, gate, mix, product basis): from dh (dE/d its output) to dhin (dE/d its
// input, owned rows: the residual), dmv and dov (dE/dm, dE/do) and, for the reference backend, obar. A team per block
// of atoms, as in the forward (each weight read once for the block; the atoms' rows in team scratch,
// [feature][atom]). Lt: the highest degree of the update (as in the forward); the input adjoint's rows above it are
// written 0.
template <class T, class ExecSpace>
void node_adjoint(const ModelData<T, ExecSpace> md, const Step<ExecSpace>& step, const LayerViews<T, ExecSpace>& layer,
                  const Rows<T, ExecSpace>& dh, const Rows<T, ExecSpace>& dhin, const Rows<T, ExecSpace>& dmv,
                  const Rows<T, ExecSpace>& dov, const Rows<T, ExecSpace>& obar, int Lt) {
  using TeamMember = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const int nl = step.nl, block_atoms = step.block_atoms, K = md.K, C = md.C, L = md.L, KC = K * C, A = md.A;
  const int gate_rows = step.gate_rows, CperA = C / A, KCt = (Lt + 1) * (Lt + 1) * C, weights = layer.weights;
  const size_t node_scratch = step.node_scratch;
  const bool fused = step.fused, product = layer.product;
  if (product && Lt != L) throw std::logic_error("node_adjoint: a product-basis layer updates every degree");
  auto mv = layer.m, ov = layer.o, zv = layer.z, h_update = layer.hp, gate_pre = layer.gate, rms_norm = layer.rms;
  kernels::parallel_for_queued(
      "bm_node_adjoint", step.node_policy(), KOKKOS_LAMBDA(const TeamMember& team) {
        const int i0 = team.league_rank() * block_atoms, block_fill = nl - i0 < block_atoms ? nl - i0 : block_atoms;
        constexpr int NA = kNodeAtoms;
        // dhp: dE/dh, then in place dE/d(update output); hps: the update's output, later dE/do (reference backend)
        T* dhp = static_cast<T*>(team.team_scratch(0).get_shmem_aligned(node_scratch - 64, 64));  // (KC, NA)
        T* hps = dhp + KC * NA;                                                                        // (KC, NA)
        T* da = hps + KC * NA;                                                                         // (KC, NA)
        T* dz = da + KC * NA;                                                                          // (KC, NA)
        T* dgam = dz + KC * NA;                                                                        // (L C, NA)
        T* coef = dgam + gate_rows * NA;                                                               // (L + 1, NA)
        const T* w = md.w.data() + weights;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KCt * NA), [&](int n) {
          const int a = n % NA, x_ = n / NA;
          dhp[n] = a < block_fill ? dh(i0 + a, x_) : T(0);
          hps[n] = a < block_fill ? h_update(i0 + a, x_) : T(0);
        });
        team.team_barrier();
        // RMS norm, per atom and degree l: one thread per (atom, l)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block_fill * (Lt + 1)), [&](int n) {
          const int a = n / (Lt + 1), l = n % (Lt + 1);
          const T rms = rms_norm(i0 + a, l);
          T dot = 0;
          for (int x_ = l * l * C; x_ < (l + 1) * (l + 1) * C; ++x_)
            dot += dhp[x_ * NA + a] * w[md.o_gn[l] + x_ % C] * hps[x_ * NA + a];
          coef[l * NA + a] = dot / (T((2 * l + 1) * C) * rms * rms * rms);
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block_fill * KC), [&](int n) {
          const int a = n / KC, x_ = n % KC, l = degree_of(x_ / C);
          if (x_ >= KCt) {  // degrees the update skipped: their adjoint is 0
            dhin(i0 + a, x_) = T(0);
            return;
          }
          const T v =
              w[md.o_gn[l] + x_ % C] * dhp[x_ * NA + a] / rms_norm(i0 + a, l) - hps[x_ * NA + a] * coef[l * NA + a];
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
            dz[n * NA + a] = a >= block_fill   ? T(0)
                             : k == 0 ? acc[a] * silu_grad(zv(i0 + a, c))
                                      : acc[a] * sigmoid(gate_pre(i0 + a, (l - 1) * C + c));
          }
        });
        team.team_barrier();
        // gate pre-activations
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Lt * C * NA), [&](int n) {
          const int a = n % NA, lc = n / NA, l = 1 + lc / C, c = lc % C;
          T g = 0;
          if (a < block_fill) {
            const T sg = sigmoid(gate_pre(i0 + a, lc));
            T acc = 0;
            for (int k = l * l; k < (l + 1) * (l + 1); ++k) acc += da[(k * C + c) * NA + a] * zv(i0 + a, k * C + c);
            g = acc * sg * (T(1) - sg);
          }
          dgam[n] = g;
        });
        team.team_barrier();
        // product basis (correlation 2): dE/dp = Wp^T dz into dhp and the block's m rows into da (both free now)
        if (product) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KC), [&](int n) {
            const int k = n / C, c = n % C, l = degree_of(k);
            T acc[NA];
            for (int a = 0; a < NA; ++a) acc[a] = 0;
            block_fma(w + md.o_Wp[l] + c, C, dz + k * C * NA, C, acc);
            for (int a = 0; a < NA; ++a) {
              dhp[n * NA + a] = acc[a];
              da[n * NA + a] = a < block_fill ? mv(i0 + a, n) : T(0);
            }
          });
          team.team_barrier();
        }
        // mixes -> dE/dm, dE/do (their l >= 1 rows unset where the update skipped them: nothing reads them)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KCt), [&](int n) {
          const int k = n / C, c = n % C, l = degree_of(k);
          T am[NA], ao[NA];
          for (int a = 0; a < NA; ++a) am[a] = ao[a] = 0;
          const int oM = k == 0 ? md.o_Wm0 : md.o_Wm[l], oO = k == 0 ? md.o_Wo0 : md.o_Wo[l];
          block_fma2(w + oM + c, w + oO + c, C, dz + k * C * NA, C, am, ao);
          if (k == 0 && Lt > 0) block_fma2(w + md.o_Wgm + c, w + md.o_Wgo + c, C, dgam, L * C, am, ao);
          if (product) block_product_adjoint(md, w, n, da, dhp, am);
          for (int a = 0; a < block_fill; ++a) {
            dmv(i0 + a, n) = am[a];
            dov(i0 + a, n) = ao[a];
            hps[n * NA + a] = ao[a];  // (the update's output is no longer read)
          }
        });
        if (fused) return;  // the fused kernels do not read obar
        team.team_barrier();
        // per-head dE/do . o (the softmax adjoint of the reference backend uses it)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block_fill * A), [&](int n) {
          const int a = n / A, hd = n % A;
          T acc = 0;
          for (int k = 0; k < K; ++k)
            for (int c = hd * CperA; c < (hd + 1) * CperA; ++c) acc += hps[(k * C + c) * NA + a] * ov(i0 + a, k * C + c);
          obar(i0 + a, hd) = acc;
        });
      });
}

// One atom's share of the force fold: its force (added to f where add) and per-atom virial from the fused adjoints'
// accumulators (the kernels tallied each edge's terms onto both of its ends), and, into acc, its energy and virial.
// Grouped senders put the images' terms on their atoms' rows and write no ghost row: rows from n_own on are written
// as zeros without reading the accumulators, so that a caller may fold them or, like LAMMPS with newton off, leave
// them.
template <class ExecSpace>
struct FoldFusedForces {
  using value_type = EnergyVirial;  // (the reduction's; two call operators leave nothing to deduce it from)
  Kokkos::View<double**, Kokkos::LayoutRight, ExecSpace> ff, ffs, fv, fvs;
  Kokkos::View<double*, ExecSpace> atom_energy;
  Kokkos::View<double* [3], Kokkos::LayoutRight, ExecSpace> f;
  Kokkos::View<double* [6], Kokkos::LayoutRight, ExecSpace> vatom;
  int nl, n_own;
  bool add, want_vatom;
  KOKKOS_INLINE_FUNCTION void operator()(int n, EnergyVirial& acc) const {
    if (n < nl) acc.v[0] += atom_energy(n);
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
      acc.v[1 + a] += v;
      if (want_vatom) vatom(n, a) = v;
    }
  }
  // the same without the sums
  KOKKOS_INLINE_FUNCTION void operator()(int n) const {
    EnergyVirial unused;
    (*this)(n, unused);
  }
};

// Forces and per-atom virials from the fused adjoints' accumulators (FoldFusedForces); the owned atoms' energies
// (atom_energy) and the virial summed into sums_d only on steps that want them (out.want_energy / want_virial): the
// reduction takes several times as long as the fold alone at small sizes. n_send >= 0: the senders were grouped.
template <class T, class ExecSpace>
void fold_fused_forces(const Step<ExecSpace>& step, const FusedState<T, ExecSpace>& fused_state, int n_send,
                       const Kokkos::View<double*, ExecSpace>& atom_energy, Results<ExecSpace>& out,
                       const EnergyVirialSum<ExecSpace>& sums_d) {
  using Policy = Kokkos::RangePolicy<ExecSpace>;
  const int nl = step.nl, na = step.na;
  const FoldFusedForces<ExecSpace> fold{fused_state.f,  fused_state.f_send, fused_state.vatom,
                                           fused_state.vatom_send, atom_energy, out.f, out.vatom, nl,
                                           n_send >= 0 ? nl : na, out.add_forces,
                                           out.vatom.extent(0) >= static_cast<size_t>(na) && na > 0};
  if (out.want_energy || out.want_virial)
    kernels::parallel_reduce_queued("bm_fused_out", Policy(0, na), fold, sums_d);
  else
    kernels::parallel_for_queued("bm_fused_out", Policy(0, na), fold);
}

}  // namespace model_detail
}  // namespace batmobile
