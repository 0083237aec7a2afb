// Host drivers of one fused interaction layer (interaction.hpp): interaction_forward() and interaction_backward(),
// their workspace InteractionWork, and the launch of a fused kernel (Kokkos's, or parallel_for_const_slots with the
// register cap of interaction_launch.hpp, on an execution-space instance of its own where the adjoints overlap).
#pragma once
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_cache.hpp"
#include "cuda_launch.hpp"
#include "graph.hpp"
#include "impl/launch_tuning.hpp"
#include "interaction_launch.hpp"
#include "interaction_project_qk.hpp"
#include "lanes.hpp"

namespace batmobile {
namespace kernels {

template <class T, class Device>
struct InteractionWork {
  Kokkos::View<T**, Kokkos::LayoutRight, Device> q, k, M, Z, gq, gk;
  // Optional, set by the caller: the sender adjoint's own force / virial accumulators (n_total, 3) and (n_total, 6),
  // summed with f and vatom by the caller. With them the two adjoints write disjoint arrays and run side by side
  // where the back-end has concurrent Lanes (CUDA); without them the sender adds to f and vatom after the pair
  // adjoint.
  Kokkos::View<double**, Kokkos::LayoutRight, Device> f_send, vatom_send;
  std::shared_ptr<Lanes<typename Device::execution_space>> lanes;  // created at the first concurrent adjoint
  // Set by a caller that wrote q and k for the next interaction_forward itself (e.g. per species, for an embedding
  // input), after sizing them with resize: that forward then projects nothing (and clears the flag).
  bool qk_given = false;
  // Grow-only, with 20 % headroom beyond the first size: MD changes n_total (the ghosts) at every re-neighbouring,
  // and each reallocation of the six arrays initialises and fences. Returns whether the arrays were reallocated.
  bool resize(int n_recv, int n_total, int A, int dk) {
    const bool first = q.data() == nullptr;
    const bool grow = int(q.extent(0)) < n_recv || int(k.extent(0)) < n_total || int(M.extent(1)) != A ||
                      int(q.extent(1)) != A * dk;
    if (grow) {
      const int nr = first ? n_recv : n_recv + n_recv / 5 + 16, nt = first ? n_total : n_total + n_total / 5 + 16;
      q = decltype(q)("q", nr, A * dk);
      gq = decltype(q)("gq", nr, A * dk);
      k = decltype(q)("k", nt, A * dk);
      gk = decltype(q)("gk", nt, A * dk);
      M = decltype(q)("M", nr, A);
      Z = decltype(q)("Z", nr, A);
    }
    return grow;
  }
};

// The launches that parallel_for_const_slots takes over (compiled only there, to keep the build time):
// CUDA builds, float, radial mode >= 1, capped (fused_cap_blocks): the forward and the adjoints with key width
// <= kSmallDk, as MD runs them. The uncapped launches go through Kokkos's.
template <class Kern, class Pol>
inline constexpr bool const_slots_compiled = [] {
  using Tag = typename Pol::work_tag;
  if constexpr (fused_cap_blocks<Kern, Tag> > 0)
    return const_launch_available && std::is_same<Pol, CappedPolicy<Kern, Tag>>::value;
  return false;
}();

// parallel_for of a fused kernel: through parallel_for_const_slots where compiled (unless a test switched it off:
// impl::LaunchTuning), else through Kokkos's constant buffer (parallel_for_constant).
template <class Kern, class Pol>
void launch_fused(const char* name, const Kern& kern, const Pol& pol) {
  if constexpr (const_slots_compiled<Kern, Pol>) {
    if (impl::launch_tuning().const_slot_launch) {
      parallel_for_const_slots(name, pol, kern);
      return;
    }
  }
  parallel_for_constant(name, pol, kern);
}

// Policy P with pol's league, team and scratch, on execution-space instance `space`.
template <class P, class Pol>
P policy_on(const typename P::execution_space& space, const Pol& pol) {
  P p(space, pol.league_size(), pol.team_size());
  return p.set_scratch_size(0, Kokkos::PerTeam(pol.scratch_size(0)));  // (no per-thread scratch here)
}

// Launches a fused kernel with policy pol's league, team and scratch on execution-space instance `space` (a Lanes
// lane or the default), capped where fused_capped says so.
template <class Kern, class Pol>
void launch_kernel(const char* name, const Kern& kern, const Pol& pol, const typename Kern::exec& space) {
  using Tag = typename Pol::work_tag;
  if constexpr (fused_cap_blocks<Kern, Tag> > 0) {
    if (fused_capped<Kern, Tag>(pol.team_size())) {
      launch_fused(name, kern, policy_on<CappedPolicy<Kern, Tag>>(space, pol));
      return;
    }
  }
  if constexpr (runs_on_host<typename Kern::exec>) {
    // Host threads take teams dynamically: the sender adjoint's teams (ghosts included) differ widely in edge count
    // and are ordered owned atoms first, so a static split left one thread most of the work.
    using Dynamic = Kokkos::TeamPolicy<typename Kern::exec, Tag, Kokkos::Schedule<Kokkos::Dynamic>>;
    launch_fused(name, kern, policy_on<Dynamic>(space, pol));
  } else {
    launch_fused(name, kern, policy_on<Kokkos::TeamPolicy<typename Kern::exec, Tag>>(space, pol));
  }
}

// Rejects a feature view that is not (rows, K, C): the kernels index its rows with K C values each (components).
template <class V>
void check_feature_view(const V& v, int K, int C, const char* name) {
  if (v.data() != nullptr && (int(v.extent(1)) != K || int(v.extent(2)) != C || int(v.stride(1)) != C ||
                              size_t(v.stride(0)) != size_t(K) * C))
    throw std::invalid_argument(std::string("batmobile: feature view ") + name + " is not (rows, K, C) contiguous");
}

// The inputs that the forward and the adjoint kernels of a layer share.
template <class Kern, class GraphT, class Params, class Features, class Outputs, class Work>
void bind_layer(Kern& kern, const GraphT& g, const Params& prm, const Features& h, const Outputs& o,
                const Work& work) {
  constexpr int K = Kern::K;
  check_feature_view(h, K, prm.C, "h");
  check_feature_view(o, K, prm.C, "o");
  kern.g = g;
  kern.prm = prm;
  kern.h = h;
  kern.o = o;
  kern.M = work.M;
  kern.Z = work.Z;
  kern.q = work.q;
  kern.k = work.k;
}

// Forward of one layer: m (and, if ATTN, o, saving M and Z in work). ROLE: the layer role's kernels
// (InteractionKernel; prm from make_layer_params with the same role); Dims: the kernels' dimensions (prm must match
// FixedDims: dims_match); team_size: see interaction_launch.hpp.
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer, class Dims = RuntimeDims>
void interaction_forward(const Graph<T, Device>& g, const LayerParams<T, Device>& prm,
                         const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& h,
                         const Kokkos::View<T***, Kokkos::LayoutRight, Device>& m,
                         const Kokkos::View<T***, Kokkos::LayoutRight, Device>& o, InteractionWork<T, Device>& work,
                         int team_size = 0) {
  using exec = typename Device::execution_space;
  using Kern = InteractionKernel<T, Device, L, ATTN, kMaxDk, ROLE, Dims>;
  check_dims<Dims>(prm);
  const bool qk_given = work.qk_given;
  work.qk_given = false;
  if (work.resize(g.n_recv, g.n_total, prm.A, prm.dk) && qk_given)
    throw std::logic_error("interaction_forward: q and k were given in work arrays too small for this graph");
  if (ATTN && !qk_given) {
    ProjectQK<T, Device> pq{h,      {},      prm.Wq,  prm.Wk,   prm.WqT, prm.WkT, work.q,
                            work.k, work.gq, work.gk, g.n_recv, prm.C,   prm.A * prm.dk};
    Kokkos::parallel_for("batmobile::project_qk",
                         Kokkos::RangePolicy<exec, Kokkos::IndexType<int64_t>>(0, int64_t(g.n_total) * prm.A * prm.dk),
                         pq);
  }
  Kern kern;
  bind_layer(kern, g, prm, h, o, work);
  kern.m = m;
  with_atom_policy<Kern::template ForwardT>(kern, g.n_recv, false, team_size, [&](const auto& pol) {
    launch_kernel("batmobile::interaction_fwd", kern, pol, default_instance<exec>());
  });
}

// Adjoint of one layer given gm = dE/dm, go = dE/do (receivers); accumulates f, vatom and (not for an embedding
// input) gh.
template <class T, class Device, int L, bool ATTN, int ROLE = kGeneralLayer, class Dims = RuntimeDims>
void interaction_backward(const Graph<T, Device>& g, const LayerParams<T, Device>& prm,
                          const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& h,
                          const Kokkos::View<T***, Kokkos::LayoutRight, Device>& o,
                          const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& gm,
                          const Kokkos::View<const T***, Kokkos::LayoutRight, Device>& go,
                          const Kokkos::View<T***, Kokkos::LayoutRight, Device>& gh,
                          const Kokkos::View<double**, Kokkos::LayoutRight, Device>& f,
                          const Kokkos::View<double**, Kokkos::LayoutRight, Device>& vatom,
                          InteractionWork<T, Device>& work, int team_size = 0) {
  using exec = typename Device::execution_space;
  check_dims<Dims>(prm);
  with_adjoint_kernel<T, Device, L, ATTN, ROLE, Dims>(prm, [&](auto& kern) {
    using Kern = std::decay_t<decltype(kern)>;
    bind_layer(kern, g, prm, h, o, work);
    check_feature_view(gm, Kern::K, prm.C, "gm");
    check_feature_view(go, Kern::K, prm.C, "go");
    kern.gm = gm;
    kern.go = go;
    kern.gh = gh;
    kern.gq = work.gq;
    kern.gk = work.gk;
    kern.f = f;
    kern.vatom = vatom;
    // The pair adjoint covers every edge of the owned atoms, the sender adjoint the edges of other ranks' ghosts
    // (none with sender groups: their images are owned atoms). Where the caller gave the sender adjoint its own
    // accumulators, the two kernels write disjoint arrays and run side by side on two Lanes (CUDA streams): their
    // teams fill the GPU's block slots better together than two partial waves in turn.
    const int senders = g.n_send >= 0 ? 0 : g.n_total - g.n_recv;
    Kern send = kern;
    send.atom0 = g.n_recv;
    const bool own = work.f_send.extent(0) >= size_t(g.n_total) && work.vatom_send.extent(0) >= size_t(g.n_total) &&
                     work.f_send.extent(1) == 3 && work.vatom_send.extent(1) == 6;
    if (own) send.f = work.f_send, send.vatom = work.vatom_send;
    const bool concurrent = senders > 0 && own && Lanes<exec>::concurrent;
    if (concurrent && !work.lanes) work.lanes = std::make_shared<Lanes<exec>>();
    if (concurrent) work.lanes->fork();
    const exec& first_space = concurrent ? work.lanes->lane(0) : default_instance<exec>();
    const exec& send_space = concurrent ? work.lanes->lane(1) : default_instance<exec>();
    with_atom_policy<Kern::template PairAdjT>(kern, g.n_recv, kPairScratch, team_size, [&](const auto& pol) {
      launch_kernel("batmobile::interaction_pair_adj", kern, pol, first_space);
    });
    if (senders > 0)
      with_atom_policy<Kern::template SendAdjT>(send, senders, kSendScratch, team_size, [&](const auto& pol) {
        launch_kernel("batmobile::interaction_send_adj", send, pol, send_space);
      });
    if (concurrent) work.lanes->join();
  });
  if (ATTN && !(ROLE & kEmbeddingInput)) {
    ProjectQK<T, Device> pq{h,      gh,      prm.Wq,  prm.Wk,   prm.WqT, prm.WkT, work.q,
                            work.k, work.gq, work.gk, g.n_recv, prm.C,   prm.A * prm.dk};
    // (with sender groups only the groups' rows of gk are written: the images' dE/dk is in their atom's row)
    Kokkos::parallel_for("batmobile::project_qk_adj",
                         Kokkos::RangePolicy<exec, typename ProjectQK<T, Device>::Adjoint, Kokkos::IndexType<int64_t>>(
                             0, int64_t(g.senders()) * prm.C),
                         pq);
  }
}

}  // namespace kernels
}  // namespace batmobile
