// Explicit instantiation: double, default execution space (see BATMOBILE_INSTANTIATE_MODEL in model_impl.hpp).
#include "model/model_impl.hpp"

BATMOBILE_INSTANTIATE_MODEL(double, Kokkos::DefaultExecutionSpace)
