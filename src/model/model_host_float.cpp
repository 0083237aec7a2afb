// Explicit instantiation: float, default host execution space where it differs from the default (GPU builds).
#include "model/model_impl.hpp"

#if defined(KOKKOS_ENABLE_CUDA) || defined(KOKKOS_ENABLE_HIP)
BATMOBILE_INSTANTIATE_MODEL(float, Kokkos::DefaultHostExecutionSpace)
#endif
