// The reference edge backend: the message and attention passes and their adjoints one edge at a time, with per-edge
// arrays (attention weights, dE/ds, dE/dr) instead of the fused kernels' one team per atom. Straightforward and slow;
// the check on the fused kernels (every model test runs both).
#pragma once
#include <Kokkos_Core.hpp>

#include "model/device_math.hpp"
#include "model/model_step.hpp"
#include "model/reference_edge_math.hpp"

namespace batmobile {
namespace model_detail {

// Layer t's queries and keys, then per receiver its message and attention sums (m, o) and softmax statistics.
template <class T, class ExecSpace>
void reference_forward_layer(const ModelData<T, ExecSpace> md, const Step<ExecSpace>& step,
                             const LayerViews<T, ExecSpace>& layer) {
  using Policy = Kokkos::RangePolicy<ExecSpace>;
  const int nl = step.nl, na = step.na, K = md.K, C = md.C, KC = K * C, A = md.A, dk = md.dk, AD = A * dk, P = md.P;
  const int CperA = C / A, weights = layer.weights;
  const T inv_sqrt_dk = T(1) / Kokkos::sqrt(T(dk));
  const bool use_rcache = step.use_rcache;
  auto x = step.graph.x;
  auto recv_off = step.graph.recv_offsets;
  auto sender_of = step.graph.senders;
  auto h = layer.h, mv = layer.m, ov = layer.o, qv = layer.q, kv = layer.k, smax = layer.smax, zsum = layer.zsum,
       rcache = layer.rcache;
  Kokkos::parallel_for(
      "bm_qk", Policy(0, na), KOKKOS_LAMBDA(int n) {
        for (int r = 0; r < AD; ++r) {
          T ak = 0, aq = 0;
          for (int c = 0; c < C; ++c) {
            ak += md.w(weights + md.o_Wk + r * C + c) * h(n, c);
            aq += md.w(weights + md.o_Wq + r * C + c) * h(n, c);
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
        for (int e = recv_off(i); e < recv_off(i + 1); ++e) {
          const int j = sender_of(e);
          const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
          edge_geometry<T>(md, xi, xj, false, g);
          if (!(g.env > T(0))) continue;
          const T log_env = Kokkos::log(g.env);
          for (int a = 0; a < A; ++a) {
            T s = 0;
            for (int q = 0; q < dk; ++q) s += qv(i, a * dk + q) * kv(j, a * dk + q);
            s *= inv_sqrt_dk;
            for (int n = 0; n < md.NB; ++n) s += md.w(weights + md.o_Wg + a * md.NB + n) * g.B[n];
            if (s + log_env > M[a]) M[a] = s + log_env;
          }
        }
        // pass 2: message and attention sums
        T macc[kMaxK * kMaxC], oacc[kMaxK * kMaxC], V[kMaxK * kMaxC];
        T a1[kMaxH], R0[2 * kMaxPaths * kMaxC];
        for (int x_ = 0; x_ < KC; ++x_) macc[x_] = 0, oacc[x_] = 0;
        for (int e = recv_off(i); e < recv_off(i + 1); ++e) {
          const int j = sender_of(e);
          const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
          edge_geometry<T>(md, xi, xj, false, g);
          radial_mlp<T>(md, weights, g.B, a1, R0);
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
            for (int n = 0; n < md.NB; ++n) s += md.w(weights + md.o_Wg + a * md.NB + n) * g.B[n];
            // e = exp(s + log u - M): the max edge has weight 1, so Z >= 1 (o does not depend on M)
            ex[a] = g.env > T(0) ? Kokkos::exp(s + Kokkos::log(g.env) - M[a]) : T(0);
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

// Per-edge adjoint arrays of the reference backend.
template <class T, class ExecSpace>
struct ReferenceEdgeAdjoint {
  Rows<T, ExecSpace> p, ds;  // attention weight and dE/ds per (edge, head)
  EdgeVectors<ExecSpace> grad;  // dE/dr_ij per edge, summed over the layers
};

// Layer t's adjoint over edges, given dE/dm, dE/do and obar of its node adjoint, adding into dhin: per receiver (edge
// geometry adjoint into edge.grad, query adjoint; saves the attention weights and dE/ds per edge), then per sender
// (owned and ghost; a gather of the feature adjoints, no atomics).
template <class T, class ExecSpace>
void reference_backward_layer(const ModelData<T, ExecSpace> md, const Step<ExecSpace>& step,
                              const LayerViews<T, ExecSpace>& layer, const Rows<T, ExecSpace>& dmv,
                              const Rows<T, ExecSpace>& dov, const Rows<T, ExecSpace>& obar,
                              const ReferenceEdgeAdjoint<T, ExecSpace>& edge, const Rows<T, ExecSpace>& dhin) {
  using Policy = Kokkos::RangePolicy<ExecSpace>;
  const int nl = step.nl, na = step.na, K = md.K, C = md.C, KC = K * C, L = md.L, A = md.A, dk = md.dk, AD = A * dk;
  const int P = md.P, CperA = C / A, weights = layer.weights;
  const T inv_sqrt_dk = T(1) / Kokkos::sqrt(T(dk));
  const bool use_rcache = step.use_rcache;
  auto x = step.graph.x;
  auto recv_off = step.graph.recv_offsets;
  auto sender_of = step.graph.senders;
  auto send_off = step.send_offsets, send_edge = step.send_edges, edge_recv = step.edge_receiver;
  auto h = layer.h, qv = layer.q, kv = layer.k, smax = layer.smax, zsum = layer.zsum, rcache = layer.rcache;
  auto ep = edge.p, eds = edge.ds;
  auto egrad = edge.grad;
  // (b) per receiver: edge geometry adjoint (dE/dr per edge), query adjoint; saves P and dE/ds per edge
  Kokkos::parallel_for(
      "bm_edge_adjoint_receiver", Policy(0, nl), KOKKOS_LAMBDA(int i) {
        const double xi[3] = {x(i, 0), x(i, 1), x(i, 2)};
        T dq[kMaxAttnWidth];
        for (int r = 0; r < AD; ++r) dq[r] = 0;
        EdgeGeom<T> g;
        T a1[kMaxH], R0[2 * kMaxPaths * kMaxC], dR[2 * kMaxPaths * kMaxC], V[kMaxK * kMaxC];
        T dY[kMaxK], dYdu[kMaxK][3];
        for (int e = recv_off(i); e < recv_off(i + 1); ++e) {
          const int j = sender_of(e);
          const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
          edge_geometry<T>(md, xi, xj, true, g);
          const T* R0p = radial_outputs<T>(md, weights, g.B, a1, R0, use_rcache, rcache, e);
          const T* hj = &h(j, 0);
          for (int x_ = 0; x_ < KC; ++x_) V[x_] = 0;
          tensor_product<T>(md, hj, R0p + P * C, g.env, g.Y, V);
          T Pa[kMaxHeads], ds[kMaxHeads], du = 0;
          for (int a = 0; a < A; ++a) {
            T s = 0;
            for (int q = 0; q < dk; ++q) s += qv(i, a * dk + q) * kv(j, a * dk + q);
            s *= inv_sqrt_dk;
            for (int n = 0; n < md.NB; ++n) s += md.w(weights + md.o_Wg + a * md.NB + n) * g.B[n];
            const bool inside = g.env > T(0);
            const T ex = inside ? Kokkos::exp(s + Kokkos::log(g.env) - smax(i, a)) : T(0);
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
            for (int hh = 0; hh < md.H; ++hh) ds1[hh] += md.w(weights + md.o_W2 + o * md.H + hh) * gr;
          }
          T dB[kMaxNB];
          for (int n = 0; n < md.NB; ++n) {
            T acc = 0;
            for (int a = 0; a < A; ++a) acc += md.w(weights + md.o_Wg + a * md.NB + n) * ds[a];
            dB[n] = acc;
          }
          for (int hh = 0; hh < md.H; ++hh) {
            const T da1 = ds1[hh] * silu_grad(a1[hh]);
            for (int n = 0; n < md.NB; ++n) dB[n] += md.w(weights + md.o_W1 + hh * md.NB + n) * da1;
          }
          T dd = du * g.denv;
          for (int n = 0; n < md.NB; ++n) dd += dB[n] * g.dB[n];
          sh_gradient<T>(L, g.u_hat, dYdu);
          T grad_u[3] = {0, 0, 0};
          for (int k = 0; k < K; ++k)
            for (int a = 0; a < 3; ++a) grad_u[a] += dY[k] * dYdu[k][a];
          const T grad_u_radial = grad_u[0] * g.u_hat[0] + grad_u[1] * g.u_hat[1] + grad_u[2] * g.u_hat[2];
          for (int a = 0; a < 3; ++a)
            egrad(e, a) += double(dd * g.u_hat[a] + (grad_u[a] - grad_u_radial * g.u_hat[a]) / g.d);
        }
        for (int c = 0; c < C; ++c) {
          T acc = 0;
          for (int r = 0; r < AD; ++r) acc += md.w(weights + md.o_Wq + r * C + c) * dq[r];
          dhin(i, c) += acc;
        }
      });
  // (c) per sender (owned and ghost): gather of the feature adjoints, no atomics
  Kokkos::parallel_for(
      "bm_edge_adjoint_sender", Policy(0, na), KOKKOS_LAMBDA(int j) {
        if (send_off(j) == send_off(j + 1)) return;
        const double xj[3] = {x(j, 0), x(j, 1), x(j, 2)};
        T acc[kMaxK * kMaxC], dkj[kMaxAttnWidth];
        for (int x_ = 0; x_ < KC; ++x_) acc[x_] = 0;
        for (int r = 0; r < AD; ++r) dkj[r] = 0;
        EdgeGeom<T> g;
        T a1[kMaxH], R0[2 * kMaxPaths * kMaxC];
        for (int q_ = send_off(j); q_ < send_off(j + 1); ++q_) {
          const int e = send_edge(q_);
          const int i = edge_recv(e);
          const double xi[3] = {x(i, 0), x(i, 1), x(i, 2)};
          edge_geometry<T>(md, xi, xj, false, g);
          const T* R0p = radial_outputs<T>(md, weights, g.B, a1, R0, use_rcache, rcache, e);
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
          for (int r = 0; r < AD; ++r) s += md.w(weights + md.o_Wk + r * C + c) * dkj[r];
          dhin(j, c) += s;
        }
      });
}

// Forces on all atoms (added to out.f where out.add_forces) and the virial (into virial_d) from the per-edge dE/dr.
template <class ExecSpace>
void reference_forces_and_virial(const Step<ExecSpace>& step, const EdgeVectors<ExecSpace>& egrad, Results<ExecSpace>& out,
                                 const VirialSum<ExecSpace>& virial_d) {
  using Policy = Kokkos::RangePolicy<ExecSpace>;
  const int nl = step.nl, na = step.na, n_edges = step.n_edges;
  auto x = step.graph.x;
  auto recv_off = step.graph.recv_offsets;
  auto sender_of = step.graph.senders;
  auto send_off = step.send_offsets, send_edge = step.send_edges, edge_recv = step.edge_receiver;
  auto f = out.f;
  const bool add = out.add_forces;
  Kokkos::parallel_for(
      "bm_forces", Policy(0, na), KOKKOS_LAMBDA(int n) {
        double force[3] = {0, 0, 0};
        if (n < nl)
          for (int e = recv_off(n); e < recv_off(n + 1); ++e)
            for (int a = 0; a < 3; ++a) force[a] += egrad(e, a);
        for (int q = send_off(n); q < send_off(n + 1); ++q)
          for (int a = 0; a < 3; ++a) force[a] -= egrad(send_edge(q), a);
        for (int a = 0; a < 3; ++a) f(n, a) = add ? f(n, a) + force[a] : force[a];
      });
  // symmetrised edge tally -(r (x) g + g (x) r) / 2, g = dE/dr, in LAMMPS order xx yy zz xy xz yz
  Kokkos::parallel_reduce(
      "bm_virial", Policy(0, n_edges),
      KOKKOS_LAMBDA(int e, model_detail::V6& acc) {
        const int i = edge_recv(e), j = sender_of(e);
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
}

// Per-atom virials into out.vatom (where allocated): half of each edge's tally to each end.
template <class ExecSpace>
void reference_atom_virial(const Step<ExecSpace>& step, const EdgeVectors<ExecSpace>& egrad,
                           Results<ExecSpace>& out) {
  using Policy = Kokkos::RangePolicy<ExecSpace>;
  const int nl = step.nl, na = step.na;
  auto x = step.graph.x;
  auto recv_off = step.graph.recv_offsets;
  auto sender_of = step.graph.senders;
  auto send_off = step.send_offsets, send_edge = step.send_edges, edge_recv = step.edge_receiver;
  auto vatom = out.vatom;
  if (vatom.extent(0) >= static_cast<size_t>(na) && na > 0) {
    Kokkos::parallel_for(
        "bm_vatom", Policy(0, na), KOKKOS_LAMBDA(int n) {
          double v[6] = {0, 0, 0, 0, 0, 0};
          auto tally = [&](int e) {
            const int i = edge_recv(e), j = sender_of(e);
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
            for (int e = recv_off(n); e < recv_off(n + 1); ++e) tally(e);
          for (int q = send_off(n); q < send_off(n + 1); ++q) tally(send_edge(q));
          for (int a = 0; a < 6; ++a) vatom(n, a) = v[a];
        });
  }
}

}  // namespace model_detail
}  // namespace batmobile
