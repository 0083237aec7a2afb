// Explicit instantiations of the model for float and double on the default (and default host) spaces.
#include "model/model_impl.hpp"

namespace batmobile {
template class IndexMapGhostExchange<double, Kokkos::DefaultExecutionSpace>;
template class IndexMapGhostExchange<float, Kokkos::DefaultExecutionSpace>;
template class Model<double, Kokkos::DefaultExecutionSpace>;
template class Model<float, Kokkos::DefaultExecutionSpace>;
#if !defined(KOKKOS_ENABLE_CUDA) && !defined(KOKKOS_ENABLE_HIP)
#else
template class IndexMapGhostExchange<double, Kokkos::DefaultHostExecutionSpace>;
template class IndexMapGhostExchange<float, Kokkos::DefaultHostExecutionSpace>;
template class Model<double, Kokkos::DefaultHostExecutionSpace>;
template class Model<float, Kokkos::DefaultHostExecutionSpace>;
#endif
}  // namespace batmobile
