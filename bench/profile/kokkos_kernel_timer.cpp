// Minimal Kokkos profiling-interface library: wall time per kernel name (parallel_for/reduce/scan) and per
// deep_copy, printed as a table when Kokkos finalizes. Load with KOKKOS_PROFILE_LIBRARY=/path/libbm_kernel_timer.so.
// On GPUs run with CUDA_LAUNCH_BLOCKING=1 so that a kernel's end callback comes after the kernel has finished
// (otherwise the times are launch times). Output: stderr, or the file named by BM_KERNEL_TIMER_OUT.
// Build: g++ -O2 -shared -fPIC -o libbm_kernel_timer.so kokkos_kernel_timer.cpp
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;
struct Stat {
  double seconds = 0;
  long calls = 0;
};
struct Open {
  std::string name;
  Clock::time_point start;
};
std::map<std::string, Stat> stats;
std::map<uint64_t, Open> open_kernels;
uint64_t next_id = 1;
std::vector<Open> copies;
Clock::time_point t_init;
struct SpaceHandle {  // passed by value through the C interface
  char name[64];
};

uint64_t begin(const char* kind, const char* name) {
  const uint64_t id = next_id++;
  open_kernels[id] = {std::string(kind) + " " + name, Clock::now()};
  return id;
}
void end(uint64_t id) {
  auto it = open_kernels.find(id);
  if (it == open_kernels.end()) return;
  Stat& s = stats[it->second.name];
  s.seconds += std::chrono::duration<double>(Clock::now() - it->second.start).count();
  ++s.calls;
  open_kernels.erase(it);
}
}  // namespace

extern "C" {
void kokkosp_init_library(int, uint64_t, uint32_t, void*) { t_init = Clock::now(); }
void kokkosp_begin_parallel_for(const char* name, uint32_t, uint64_t* id) { *id = begin("for", name); }
void kokkosp_end_parallel_for(uint64_t id) { end(id); }
void kokkosp_begin_parallel_reduce(const char* name, uint32_t, uint64_t* id) { *id = begin("reduce", name); }
void kokkosp_end_parallel_reduce(uint64_t id) { end(id); }
void kokkosp_begin_parallel_scan(const char* name, uint32_t, uint64_t* id) { *id = begin("scan", name); }
void kokkosp_end_parallel_scan(uint64_t id) { end(id); }
void kokkosp_begin_deep_copy(SpaceHandle, const char* dst, const void*, SpaceHandle, const char* src, const void*,
                             uint64_t bytes) {
  copies.push_back({std::string("deep_copy ") + src + " -> " + dst + (bytes > (1u << 20) ? " (>1MB)" : ""),
                    Clock::now()});
}
void kokkosp_end_deep_copy() {
  if (copies.empty()) return;
  Stat& s = stats[copies.back().name];
  s.seconds += std::chrono::duration<double>(Clock::now() - copies.back().start).count();
  ++s.calls;
  copies.pop_back();
}
void kokkosp_finalize_library() {
  const double total = std::chrono::duration<double>(Clock::now() - t_init).count();
  std::vector<std::pair<std::string, Stat>> rows(stats.begin(), stats.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
  const char* path = std::getenv("BM_KERNEL_TIMER_OUT");
  FILE* f = path ? std::fopen(path, "w") : stderr;
  if (!f) f = stderr;
  double sum = 0;
  for (auto& r : rows) sum += r.second.seconds;
  std::fprintf(f, "# Kokkos kernel timer: %.3f s between init and finalize, %.3f s inside the regions below\n", total, sum);
  std::fprintf(f, "# %10s %8s %10s %6s  %s\n", "seconds", "calls", "us/call", "%", "region");
  for (auto& r : rows)
    std::fprintf(f, "  %10.4f %8ld %10.1f %6.2f  %s\n", r.second.seconds, r.second.calls,
                 1e6 * r.second.seconds / std::max(1L, r.second.calls), 100 * r.second.seconds / std::max(sum, 1e-300),
                 r.first.c_str());
  if (f != stderr) std::fclose(f);
}
}
