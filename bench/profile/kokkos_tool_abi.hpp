// The parts of Kokkos's profiling C interface that the pipeline-watching tools (kokkos_gpu_timer.cpp,
// kokkos_cupti_trace.cpp) share: the memory-space handle of the deep-copy callbacks, and the request for no global
// fences. Include it in one source per tool library: it defines the library's kokkosp_request_tool_settings.
#pragma once
#include <cstdint>

extern "C" {
struct SpaceHandle {  // passed by value through the C interface
  char name[64];
};
struct Kokkos_Tools_ToolSettings {
  bool requires_global_fencing;
  bool padding[255];
};
// Kokkos fences the device before and after every operation of a tool that does not ask otherwise, which would make
// each launch wait for the previous kernel: these tools watch the pipeline as it runs, so they ask for no fences.
void kokkosp_request_tool_settings(const uint32_t, Kokkos_Tools_ToolSettings* settings) {
  settings->requires_global_fencing = false;
}
}
