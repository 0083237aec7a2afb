// Template implementation of model.hpp, by role: device_math.hpp, reference_edge_math.hpp (device helpers),
// ghost_exchange_impl.hpp, model_weights.hpp, fused_state.hpp (the fused backend's configuration), model_step.hpp,
// model_forward_stages.hpp, model_adjoint_stages.hpp, reference_backend.hpp, model_construct.hpp, model_compute.hpp.
// Included by the explicit-instantiation files model_{device,host}_*.cpp only.
#pragma once
#include "model/ghost_exchange_impl.hpp"
#include "model/model_compute.hpp"
#include "model/model_construct.hpp"

// Explicit instantiation of the model in precision T on execution space S; one per translation unit
// (model_{device,host}_{float,double}.cpp), so that a parallel build compiles them side by side (nvcc took ~4 min
// for all four in one file).
#define BATMOBILE_INSTANTIATE_MODEL(T, S)                \
  namespace batmobile {                                  \
  template class IndexMapGhostExchange<T, S>;            \
  template class Model<T, S>;                            \
  }
