// The forward stages of Model::compute that both edge backends share: the embedding, each layer's node update and,
// inside the last layer's, the readout (with its adjoint, the seed of the backward pass).
#pragma once
#include <Kokkos_Core.hpp>
#include <stdexcept>

#include "kernels/cuda_launch.hpp"
#include "model/device_math.hpp"
#include "model/fused_state.hpp"
#include "model/model_step.hpp"

namespace batmobile {
namespace model_detail {

// Embedding of owned and ghost atoms alike (it depends only on the species) into h0's l = 0 rows: the l > 0 rows of h0
// are zero from its allocation and nothing else writes them. Fused backend (fused_state not null), in the same launch:
// layer 0's q and k per species, then, one thread per atom after the feature threads, positions in T, the accumulators
// zeroed, and the sender offsets zeroed where the sender lists are built later (one launch instead of seven).
template <class T, class ExecSpace>
void embed_atoms(const ModelData<T, ExecSpace> md, const Step<ExecSpace>& step, const Rows<T, ExecSpace>& h0,
                 FusedState<T, ExecSpace>* fused_state) {
  const int nl = step.nl, na = step.na, C = md.C, AD = md.A * md.dk;
  const bool fused = fused_state != nullptr;
  auto x = step.graph.x;
  auto species = step.graph.species;
  auto send_off = step.send_offsets;
  decltype(fused_state->x) xT;
  decltype(fused_state->f) f0, fs0;
  decltype(fused_state->vatom) v0, vs0;
  if (fused)
    xT = fused_state->x, f0 = fused_state->f, fs0 = fused_state->f_send, v0 = fused_state->vatom,
    vs0 = fused_state->vatom_send;
  const bool zero_soff = step.offsets_zeroed_early;
  // layer 0's q and k per species (FusedState::species_q): sized here, written below, not projected again
  const bool species_qk = fused && fused_state->species_q.data() != nullptr;
  decltype(fused_state->species_q) q0, k0, tq, tk;
  if (species_qk) {
    auto& w0 = fused_state->work[0];
    w0.resize(nl, na, md.A, md.dk);
    w0.qk_given = true;
    q0 = w0.q, k0 = w0.k, tq = fused_state->species_q, tk = fused_state->species_k;
  }
  // W threads per atom over its features (consecutive threads write consecutive addresses), then one per atom
  const int W = species_qk && AD > C ? AD : C;
  const int64_t n_features = int64_t(na) * W;
  kernels::parallel_for_queued(
      "bm_embed", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, n_features + (fused ? na : 0)),
      KOKKOS_LAMBDA(int64_t xf) {
        if (xf < n_features) {
          const int n = int(xf / W), f = int(xf % W), sp = species(n);  // (no model species: a zero embedding)
          if (f < C) h0(n, f) = sp >= 0 ? md.w(md.o_embed + sp * C + f) : T(0);
          if (species_qk && f < AD) {
            k0(n, f) = sp >= 0 ? tk(sp, f) : T(0);
            if (n < nl) q0(n, f) = sp >= 0 ? tq(sp, f) : T(0);
          }
          return;
        }
        const int n = int(xf - n_features);
        for (int a = 0; a < 3; ++a) xT(n, a) = T(x(n, a)), f0(n, a) = 0, fs0(n, a) = 0;
        for (int a = 0; a < 6; ++a) v0(n, a) = 0, vs0(n, a) = 0;
        if (zero_soff) {
          send_off(n) = 0;
          if (n == 0) send_off(na) = 0;
        }
      });
}

// What the readout writes (block_readout): dE/dh of the last layer's output, each owned atom's energy, and eatom where
// want_eatom.
template <class T, class ExecSpace>
struct ReadoutViews {
  Rows<T, ExecSpace> dh;
  Kokkos::View<double*, ExecSpace> atom_energy, eatom;
  bool want_eatom = false;
};

// The readout of a node block's atoms, inside the last layer's node forward once that layer's output hT is in team
// scratch ([channel][atom], padding atoms finite): per atom its energy into ro.atom_energy (and ro.eatom where wanted;
// the force fold's reduction sums them) and dE/dh into ro.dh, whole rows (only l = 0 is non-zero, so that dh needs no
// zero fill). work: 2 Hr rows of team scratch. One launch and one reduction fewer than a kernel of its own.
template <class T, class ExecSpace, class TeamMember, class Species>
KOKKOS_INLINE_FUNCTION void block_readout(const TeamMember& team, const ModelData<T, ExecSpace>& md,
                                          const Species& species, const ReadoutViews<T, ExecSpace>& ro, int i0,
                                          int block_fill, const T* hT, T* work) {
  constexpr int NA = kNodeAtoms;
  const int C = md.C, KC = md.K * C, Hr = md.Hr;
  T* er = work;              // (Hr, NA): w2_r silu(pre_r)
  T* dpre = work + Hr * NA;  // (Hr, NA): dE/d(pre_r)
  const T* w = md.w.data();
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Hr), [&](int r) {
    T pre[NA];
    for (int a = 0; a < NA; ++a) pre[a] = w[md.o_rb1 + r];
    block_fma(w + md.o_rW1t + r, Hr, hT, C, pre);  // (readout.W1 transposed, (C, Hr))
    const T w2 = w[md.o_rw2 + r];
    for (int a = 0; a < NA; ++a) {
      er[r * NA + a] = w2 * silu(pre[a]);
      dpre[r * NA + a] = md.energy_scale * w2 * silu_grad(pre[a]);
    }
  });
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block_fill * (KC - C)), [&](int n) {
    ro.dh(i0 + n / (KC - C), C + n % (KC - C)) = T(0);
  });
  team.team_barrier();
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) {
    T acc[NA];
    for (int a = 0; a < NA; ++a) acc[a] = 0;
    block_fma(w + md.o_rW1 + c, C, dpre, Hr, acc);  // (readout.W1, (Hr, C))
    for (int a = 0; a < block_fill; ++a) ro.dh(i0 + a, c) = species(i0 + a) >= 0 ? acc[a] : T(0);
  });
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block_fill), [&](int a) {
    const int s = species(i0 + a);
    T e = 0;
    for (int r = 0; r < Hr; ++r) e += er[r * NA + a];
    const double Ei = s < 0 ? 0.0 : double(md.energy_scale) * double(w[md.o_rb2] + e) + md.E_ref(s);
    ro.atom_energy(i0 + a) = Ei;
    if (ro.want_eatom) ro.eatom(i0 + a) = Ei;
  });
}

// The product basis of a node block's atoms (docs/model.md step 3): p[k3][c] = sum_q wq[q][c] sum CG m[k1][c] m[k2][c],
// from the block's m rows in team scratch (m: [feature][atom]) into p (same layout), threads over (k3, c) items.
// w: the layer's weights.
template <class T, class ExecSpace, class TeamMember>
KOKKOS_INLINE_FUNCTION void block_product_basis(const TeamMember& team, const ModelData<T, ExecSpace>& md, const T* w,
                                                const T* m, T* p) {
  constexpr int NA = kNodeAtoms;
  const int C = md.C;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, md.K * C), [&](int n) {
    const int k3 = n / C, c = n % C;
    T acc[NA];
    for (int a = 0; a < NA; ++a) acc[a] = 0;
    for (int e = md.prod_index(k3); e < md.prod_index(k3 + 1); ++e) {
      const int* row = &md.prod_index(md.prod_fwd_rows + 3 * e);  // (k1, k2, q)
      const T s = md.prod_coef(e) * w[md.o_wq + row[2] * C + c];
      const T* m1 = m + (row[0] * C + c) * NA;
      const T* m2 = m + (row[1] * C + c) * NA;
      for (int a = 0; a < NA; ++a) acc[a] += s * m1[a] * m2[a];
    }
    for (int a = 0; a < NA; ++a) p[n * NA + a] = acc[a];
  });
}

// Node update of layer t for the owned atoms, into h_next: a team per block of atoms (Step::block_atoms), threads
// over (component, channel) items, stages separated by team barriers (gates before gated activations, activations
// before the update, the update before its RMS norm). Each item reads a weight once for all atoms of the block, whose
// m, o, activations and updates live in team scratch ([feature][atom], block_row), instead of once per atom, each
// with the latency of its own load. Lt: the highest degree it computes (FusedState::update_lmax). readout (the last
// layer's call; else null): the readout of the block's atoms follows in the same kernel (block_readout). write_images:
// each atom's output row is written to its periodic images' rows as well (Step::image_offsets, image_ghosts).
template <class T, class ExecSpace>
void node_forward(const ModelData<T, ExecSpace> md, const Step<ExecSpace>& step, const LayerViews<T, ExecSpace>& layer,
                  const Rows<T, ExecSpace>& h_next, int Lt, const ReadoutViews<T, ExecSpace>* readout,
                  bool write_images = false) {
  using TeamMember = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const int nl = step.nl, block_atoms = step.block_atoms, C = md.C, L = md.L, KC = md.K * C, gate_rows = step.gate_rows;
  const int Kt = (Lt + 1) * (Lt + 1), KCt = Kt * C, weights = layer.weights, mo_rows = node_mo_rows(md);
  const size_t node_scratch = step.node_scratch;
  auto h = layer.h, hn = h_next, mv = layer.m, ov = layer.o, zv = layer.z, h_update = layer.hp, gate_pre = layer.gate,
       rms_norm = layer.rms;
  auto species = step.graph.species;
  auto image_off = step.image_offsets, image_ghost = step.image_ghosts;
  const bool with_readout = readout != nullptr, product = layer.product;
  const ReadoutViews<T, ExecSpace> ro = with_readout ? *readout : ReadoutViews<T, ExecSpace>{};
  // the product basis reads every m row (its layers are not the last, so they update every degree)
  if (product && Lt != L) throw std::logic_error("node_forward: a product-basis layer updates every degree");
  const int KCm = product ? KC : KCt;
  kernels::parallel_for_queued(
      "bm_layer_node_forward", step.node_policy(), KOKKOS_LAMBDA(const TeamMember& team) {
        const int i0 = team.league_rank() * block_atoms, block_fill = nl - i0 < block_atoms ? nl - i0 : block_atoms;
        constexpr int NA = kNodeAtoms;
        // (mo: m and o rows, later the readout's work rows; act: the activations, later the readout's input)
        T* mo = static_cast<T*>(team.team_scratch(0).get_shmem_aligned(node_scratch - 64, 64));  // (mo_rows, NA)
        T* act = mo + mo_rows * NA;                                                            // (KC, NA)
        T* hps = act + KC * NA;                                                                // (KC, NA)
        T* gs = hps + KC * NA;                                                                 // (L C, NA)
        T* rs = gs + gate_rows * NA;                                                                 // (L + 1, NA)
        const T* w = md.w.data() + weights;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, (KCm + KCt) * NA), [&](int n) {
          const int a = n % NA, r = n / NA, x_ = r < KCm ? r : KC + r - KCm;  // KCm m rows, then KCt o rows
          mo[x_ * NA + a] = a >= block_fill ? T(0) : x_ < KC ? mv(i0 + a, x_) : ov(i0 + a, x_ - KC);
        });
        team.team_barrier();
        // product basis p (correlation 2) into hps, which the update overwrites only after the mixes have read it
        if (product) {
          block_product_basis(team, md, w, mo, hps);
          team.team_barrier();
        }
        // scalar mix + SiLU, and the gate pre-activations of l >= 1
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C + Lt * C), [&](int n) {
          const int o = n < C ? n : n - C;
          // transposed weights (in, out): element (o, c) at c * rows + o
          const int oW = n < C ? md.o_Wm0t : md.o_Wgmt, oV = n < C ? md.o_Wo0t : md.o_Wgot, rows = n < C ? C : L * C;
          T z[NA];
          for (int a = 0; a < NA; ++a) z[a] = w[(n < C ? md.o_b0 : md.o_bg) + o];
          block_fma(w + oW + o, rows, mo, C, z);
          block_fma(w + oV + o, rows, mo + KC * NA, C, z);
          if (product && n < C) block_fma(w + md.o_Wpt[0] + o, C, hps, C, z);
          for (int a = 0; a < NA; ++a) {
            if (n < C) {
              if (a < block_fill) zv(i0 + a, o) = z[a];
              act[o * NA + a] = silu(z[a]);
            } else {
              if (a < block_fill) gate_pre(i0 + a, o) = z[a];
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
          if (product) block_fma(w + md.o_Wpt[l] + o, C, hps + k * C * NA, C, zz);
          for (int a = 0; a < NA; ++a) {
            if (a < block_fill) zv(i0 + a, k * C + o) = zz[a];
            act[(k * C + o) * NA + a] = zz[a] * sigmoid(gs[((l - 1) * C + o) * NA + a]);
          }
        });
        team.team_barrier();
        // update + residual
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, KCt), [&](int n) {
          const int k = n / C, o = n % C, l = degree_of(k);
          T v[NA];
          for (int a = 0; a < NA; ++a) v[a] = a < block_fill ? h(i0 + a, n) : T(0);
          block_fma(w + md.o_Wut[l] + o, C, act + k * C * NA, C, v);
          for (int a = 0; a < NA; ++a) {
            if (a < block_fill) h_update(i0 + a, n) = v[a];
            hps[n * NA + a] = v[a];
          }
        });
        team.team_barrier();
        // RMS norm per atom and degree l: one thread per (atom, l) sums its (2l + 1) C squares
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block_fill * (Lt + 1)), [&](int n) {
          const int a = n / (Lt + 1), l = n % (Lt + 1);
          T ss = 0;
          for (int x_ = l * l * C; x_ < (l + 1) * (l + 1) * C; ++x_) ss += hps[x_ * NA + a] * hps[x_ * NA + a];
          const T rms = Kokkos::sqrt(ss / T((2 * l + 1) * C) + T(kNormEps));
          rms_norm(i0 + a, l) = rms;
          rs[l * NA + a] = rms;
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, block_fill * KCt), [&](int n) {
          const int a = n / KCt, x_ = n % KCt, l = degree_of(x_ / C);
          const T v = hps[x_ * NA + a] * w[md.o_gn[l] + x_ % C] / rs[l * NA + a];
          hn(i0 + a, x_) = v;
          if (write_images)
            for (int q = image_off(i0 + a); q < image_off(i0 + a + 1); ++q) hn(nl + image_ghost(q), x_) = v;
          if (with_readout && x_ < C) act[x_ * NA + a] = v;
        });
        if (!with_readout) return;
        team.team_barrier();
        block_readout(team, md, species, ro, i0, block_fill, act, mo);
      });
}

// The energy of the owned atoms, summed from block_readout's atom energies (reference backend: the fused backend sums
// them in its force fold).
template <class ExecSpace>
void sum_atom_energies(const Step<ExecSpace>& step, const Kokkos::View<double*, ExecSpace>& atom_energy,
                       const Kokkos::View<double, ExecSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>& energy_d) {
  kernels::parallel_reduce_queued(
      "bm_energy_sum", Kokkos::RangePolicy<ExecSpace>(0, step.nl),
      KOKKOS_LAMBDA(int i, double& e) { e += atom_energy(i); }, energy_d);
}

}  // namespace model_detail
}  // namespace batmobile
