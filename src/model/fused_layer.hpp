// One layer's fused kernels (src/kernels/interaction.hpp) for feature degree L and layer role ROLE (kGeneralLayer,
// kEmbeddingInput for layer 0, kScalarOutput for the last layer; common.hpp). Declared here and compiled in one
// translation unit per L and precision (fused_layer_l<L>_<T>.cpp, generated from fused_layer_unit.cpp.in), which alone
// see the definitions:
// - nvcc gives each unit 64 KB of constant memory, of which Kokkos takes 32 KB and our launch two slots of ~1.2 KB
//   (the functor, 1,096 B on the host) per fused float kernel (cuda_launch.hpp): by that count the 27 float kernels of
//   L = 1..3 and three roles would need ~97 KB in one unit, one L's 9 ~54 KB; so the kernels with the bundled
//   potentials' dimensions compiled in (kernels::BundledDims) have units of their own too
//   (fused_layer_l<L>_<T>_bundled.cpp);
// - the units compile in parallel: one unit per L held up every build, host builds too (each took minutes for CUDA
//   sm_90 on 2 cores).
#pragma once
#include "kernels/interaction.hpp"

namespace batmobile {
namespace model_detail {

// Dims: kernels::RuntimeDims, or kernels::BundledDims for layers of those dimensions (with_layer_dims).
template <class T, class D, int L, int ROLE, class Dims = kernels::RuntimeDims>
struct FusedLayer {
  using CV3 = Kokkos::View<const T***, Kokkos::LayoutRight, D>;
  using V3 = Kokkos::View<T***, Kokkos::LayoutRight, D>;
  using D2 = Kokkos::View<double**, Kokkos::LayoutRight, D>;
  // kernels::interaction_forward / interaction_backward with ATTN and dimensions Dims
  static void forward(const kernels::Graph<T, D>& g, const kernels::LayerParams<T, D>& prm, const CV3& h, const V3& m,
                      const V3& o, kernels::InteractionWork<T, D>& work, int team_size);
  static void backward(const kernels::Graph<T, D>& g, const kernels::LayerParams<T, D>& prm, const CV3& h,
                       const V3& o, const CV3& gm, const CV3& go, const V3& gh, const D2& f, const D2& vatom,
                       kernels::InteractionWork<T, D>& work, int team_size);
  // what forward (team_fwd) and backward (team_adj) launch for n atoms (kernels::interaction_launch)
  static kernels::InteractionLaunch launch(const kernels::LayerParams<T, D>& prm, int team_fwd, int team_adj, int n);
};

#ifdef BATMOBILE_FUSED_LAYER_DEFINITIONS
template <class T, class D, int L, int ROLE, class Dims>
void FusedLayer<T, D, L, ROLE, Dims>::forward(const kernels::Graph<T, D>& g, const kernels::LayerParams<T, D>& prm,
                                       const CV3& h, const V3& m, const V3& o, kernels::InteractionWork<T, D>& work,
                                       int team_size) {
  kernels::interaction_forward<T, D, L, true, ROLE, Dims>(g, prm, h, m, o, work, team_size);
}
template <class T, class D, int L, int ROLE, class Dims>
void FusedLayer<T, D, L, ROLE, Dims>::backward(const kernels::Graph<T, D>& g, const kernels::LayerParams<T, D>& prm,
                                        const CV3& h, const V3& o, const CV3& gm, const CV3& go, const V3& gh,
                                        const D2& f, const D2& vatom, kernels::InteractionWork<T, D>& work,
                                        int team_size) {
  kernels::interaction_backward<T, D, L, true, ROLE, Dims>(g, prm, h, o, gm, go, gh, f, vatom, work, team_size);
}

template <class T, class D, int L, int ROLE, class Dims>
kernels::InteractionLaunch FusedLayer<T, D, L, ROLE, Dims>::launch(const kernels::LayerParams<T, D>& prm, int team_fwd,
                                                             int team_adj, int n) {
  return kernels::interaction_launch<T, D, L, true, ROLE, Dims>(prm, team_fwd, team_adj, n);
}

// For precision T and dimensions DIMS: every execution space the model is instantiated for (model_*.cpp), the three
// roles the model runs (a model of one layer runs it as kEmbeddingInput: the two bits together are not compiled).
#define BATMOBILE_FUSED_LAYERS_OF(T, S, L, DIMS)                                                         \
  template struct batmobile::model_detail::FusedLayer<T, S, L, batmobile::kernels::kGeneralLayer, DIMS>;   \
  template struct batmobile::model_detail::FusedLayer<T, S, L, batmobile::kernels::kEmbeddingInput, DIMS>; \
  template struct batmobile::model_detail::FusedLayer<T, S, L, batmobile::kernels::kScalarOutput, DIMS>;
#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
#define BATMOBILE_INSTANTIATE_FUSED_LAYERS(T, L, DIMS)                  \
  BATMOBILE_FUSED_LAYERS_OF(T, Kokkos::DefaultExecutionSpace, L, DIMS)  \
  BATMOBILE_FUSED_LAYERS_OF(T, Kokkos::DefaultHostExecutionSpace, L, DIMS)
#else
#define BATMOBILE_INSTANTIATE_FUSED_LAYERS(T, L, DIMS) BATMOBILE_FUSED_LAYERS_OF(T, Kokkos::DefaultExecutionSpace, L, DIMS)
#endif
#endif

// Calls f(dims) with kernels::BundledDims for a layer of feature degree kBundledL whose parameters have those
// dimensions (the bundled potentials' kernels, compiled with them), else with kernels::RuntimeDims.
template <int L, class T, class D, class F>
decltype(auto) with_layer_dims(const kernels::LayerParams<T, D>& prm, F&& f) {
  if constexpr (L == kernels::kBundledL)
    if (kernels::dims_match<kernels::BundledDims>(prm)) return f(kernels::BundledDims{});
  return f(kernels::RuntimeDims{});
}

}  // namespace model_detail
}  // namespace batmobile
