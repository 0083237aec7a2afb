// The fused kernels of feature degree L = 2 for every model instantiation (fused_layer.hpp says why a unit per L).
#define BATMOBILE_FUSED_LAYER_DEFINITIONS
#include "model/fused_layer.hpp"

BATMOBILE_INSTANTIATE_FUSED_LAYERS(2)
