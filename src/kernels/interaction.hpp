// Fused interaction (docs/model.md step 1) and on-the-fly attention (step 2) of one layer, forward and adjoint.
// This header includes the parts, by role:
//   interaction_params.hpp      LayerParams (weights and launch options), make_layer_params
//   interaction_kernel.hpp      InteractionKernel: the functor (tags, views, team-scratch layout of an edge chunk)
//   interaction_chunk.hpp       its per-chunk stages shared by the forward and the adjoints (prepare pass, radial
//                               outputs of a chunk)
//   interaction_radial.hpp      the radial MLP outputs: per channel, team GEMM, tensor-core MMA
//   interaction_forward.hpp     the forward kernel body (ForwardT)
//   interaction_adjoint.hpp     the adjoint kernel bodies: pair (PairAdjT) and sender (SendAdjT)
//   interaction_project_qk.hpp  ProjectQK: the attention projections q, k and their adjoint (node kernels)
//   interaction_launch.hpp      launch policy: team sizes, chunks, register caps, the launch report
//   interaction_driver.hpp      interaction_forward(), interaction_backward(), InteractionWork
//
// Layouts (all Kokkos::LayoutRight, T = float or double):
//   h  (n_total, K, C)  node features, K = (L+1)^2, channels innermost (ghost atoms included)
//   m  (n_recv, K, C)   message  m_i = inv_avg * sum_j TP(h_j, w(d_ij))
//   o  (n_recv, K, C)   attention output o_i (step 2 of docs/model.md)
//   M, Z (n_recv, A)    per-(receiver, head) softmax state, saved for the adjoint: M = max_j (s_ij + log u_ij),
//                       Z = sum_j exp(s_ij + log u_ij - M) (>= 1 with edges, 0 without)
//   q  (n_recv, A*dk), k (n_total, A*dk)   projections of h[.][0] (workspace)
//   f  (n_total, 3), vatom (n_total, 6) double: forces and per-atom virial (xx, yy, zz, xy, xz, yz),
//      ACCUMULATED (+=) by the adjoint; per-edge virial W_e = -(r (x) g + g (x) r) / 2,
//      g = dE/dr_ij, is split half to each atom.
//   gh (n_total, K, C)  dE/dh, ACCUMULATED (+=) by the adjoint.
//
// Kernels (tagged functors; one team per atom; on GPUs team_size = C * S threads, thread tr works on channel
// c = tr % C and edge slot s = tr / C ("edge split" S >= 1); on host back-ends one thread loops over channels).
// Edges are processed in chunks of CH = 16 (radial mode 1: radial chunks of 2-8 edges inside basis chunks, see
// prepare_basis): the team first computes, once per edge, the geometry, Bessel basis
// and the radial MLP hidden layer into team scratch (shared by all channels); then every channel computes its
// own radial-MLP outputs, SH, CG products and logit in registers; with S > 1, slot s takes the chunk edges
// t = s (mod S) and the S per-thread partials of a channel are merged in team scratch at the end of the atom, in
// the fixed order s = 0..S-1 (deterministic). No per-edge tensor goes to global memory:
//   InteractionKernel::Forward   team i: one pass over the edges of receiver i computes m_i and (ATTN) o_i
//                                with an online softmax (interaction_forward.hpp).
//   InteractionKernel::PairAdj   team i (owned atoms): recomputes each edge i <- j from gm, go: the receiver
//                                force, half the per-edge virial and dE/dq_i, and, where the reverse edge j <- i is
//                                on this rank, its sender terms (force on i, the other half, dE/dh_i, dE/dk_i),
//                                from one prepare pass and radial MLP (a graph symmetric within r_c, graph.hpp).
//   InteractionKernel::SendAdj   team j (other ranks' ghosts): loops over edges with sender j (sender CSR),
//                                recomputes them; dE/dh_j (gather), sender force, half virial, dE/dk_j. With its
//                                own force / virial accumulators (InteractionWork::f_send) it can run beside
//                                PairAdj on CUDA (lanes.hpp, with the fused kernels launched from
//                                constant-memory slots: cuda_launch.hpp).
//   ProjectQK (+ ::Adjoint)      node kernels: q, k = Wq, Wk . h[.][0] and gh[.][0] += Wq^T gq + Wk^T gk.
// Radial mode 1 (RadialMode::kTeamGemm; separate kernel instantiations, tags ForwardT<true> etc.): after
// the hidden layer, the team (on host back-ends the team's one thread) computes the radial outputs of all chunk
// edges at once, a GEMM [n x H] x [H x NW C] in which thread tr owns the columns tr + ts x and register-blocks 4
// columns x 4 (or 2) edges, so that each W2t load feeds several edges; w and dw/dd (envelope applied) go to team
// scratch and the channel-threads read their NW values per edge. Chunks of 8, 4 or 2 edges (the scratch holds
// radial_edges x NW C outputs; the end-of-atom arrays overlap the chunk, except with one thread per team); where no
// chunk fits scratch_size_max(0) the mode-0 kernels run.
// Radial mode 2 (RadialMode::kTensorCore, default): mode 1 with that GEMM on tensor cores (radial_mma, 3xTF32)
// where they apply; mode 4 (kTensorCoreF16) with f16 operands.
// Host drivers: interaction_forward(), interaction_backward() (workspace in InteractionWork; optional team_size:
// 0 = automatic (host: 1; GPU: C * S with S = 128 / C, at least 1, team <= 256, lowered until the team scratch
// fits scratch_size_max(0) and the team fits team_size_max), 1 = one thread per team, C * S = edge split S).
// Layer roles (template parameter ROLE, bits, common.hpp; docs/model.md): kEmbeddingInput, the first layer, whose
// input is the species embedding (only l = 0, constant in the positions): the tensor products run over the paths
// (0, l, l) alone and the adjoints compute forces and virials only (dE/dh, dE/dq, dE/dk are neither needed nor
// written); kScalarOutput, the last layer, of whose outputs only m[.][0] and o[.][0] reach the energy: the paths
// (l, l, 0) alone, m and o are 0 for l >= 1, and gm, go are read for l = 0 only. make_layer_params(..., role) keeps
// the radial-MLP rows of the role's paths (LayerPaths).
// Parameter gradients are not computed (not needed at run time).
#pragma once
#include "interaction_driver.hpp"
#include "interaction_params.hpp"
