// Kokkos profiling-interface library that times kernels on the GPU without serialising them: a CUDA event is
// recorded on the legacy default stream (the one Kokkos 3.4's default CUDA instance launches on) before and after
// every parallel_for / reduce / scan and deep_copy, and the table is formed from the event timestamps when Kokkos
// finalizes. Unlike kokkos_kernel_timer.cpp under CUDA_LAUNCH_BLOCKING=1, the run keeps its normal pipelining, so
// the table also says how long the GPU sat idle between operations (waiting for the host) and before which one.
//   region time  = end event - start event of the operation (GPU time from its start to its end)
//   gap before X = start event of X - end event of the operation before it (the GPU had nothing queued; the host
//                  was busy or waiting for a result)
// Load with KOKKOS_PROFILE_LIBRARY=/path/libbm_gpu_timer.so (no CUDA_LAUNCH_BLOCKING). libcudart is opened at
// run time (dlopen), so the library builds without CUDA: g++ -O2 -shared -fPIC -o libbm_gpu_timer.so
// kokkos_gpu_timer.cpp -ldl
// Environment:
//   BM_GPU_TIMER_OUT    output file (default stderr)
//   BM_GPU_TIMER_START  "name:k": start recording at the k-th launch of the kernel `name` (e.g. bm_kk_atoms:50,
//                       the first kernel of batmobile/kk's compute), so set-up and warm-up steps stay out; the
//                       window's step count is the number of launches of `name` inside it
//   BM_GPU_TIMER_MAX    most operations recorded (default 200000; two events each)
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {
using Event = void*;
struct Cuda {
  int (*event_create)(Event*) = nullptr;
  int (*event_record)(Event, void*) = nullptr;
  int (*event_sync)(Event) = nullptr;
  int (*elapsed)(float*, Event, Event) = nullptr;
  bool ok = false;
} cuda;

struct Op {
  std::string name;
  Event start, stop;
  bool step;  // a launch of BM_GPU_TIMER_START's kernel
};
std::vector<Op> ops;
size_t max_ops = 200000;
std::string start_name;
long start_count = 0, seen = 0;
bool recording = false;
std::map<uint64_t, size_t> open_ops;  // kernel id -> index in ops
std::vector<size_t> open_copies;
uint64_t next_id = 1;

void load_cuda() {
  const char* names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
  void* h = nullptr;
  for (const char* n : names)
    if ((h = dlopen(n, RTLD_NOW | RTLD_GLOBAL))) break;
  if (!h) {
    std::fprintf(stderr, "bm_gpu_timer: libcudart not found (%s); nothing recorded\n", dlerror());
    return;
  }
  cuda.event_create = reinterpret_cast<int (*)(Event*)>(dlsym(h, "cudaEventCreate"));
  cuda.event_record = reinterpret_cast<int (*)(Event, void*)>(dlsym(h, "cudaEventRecord"));
  cuda.event_sync = reinterpret_cast<int (*)(Event)>(dlsym(h, "cudaEventSynchronize"));
  cuda.elapsed = reinterpret_cast<int (*)(float*, Event, Event)>(dlsym(h, "cudaEventElapsedTime"));
  cuda.ok = cuda.event_create && cuda.event_record && cuda.event_sync && cuda.elapsed;
}

Event record() {
  Event e = nullptr;
  if (cuda.event_create(&e) != 0) return nullptr;
  cuda.event_record(e, nullptr);  // stream 0: the legacy default stream
  return e;
}

// Returns the op's index, or SIZE_MAX when not recording.
size_t begin(const char* kind, const char* name) {
  if (!cuda.ok) return SIZE_MAX;
  const bool step = !start_name.empty() && start_name == name;
  if (!recording && step && ++seen >= start_count) recording = true;
  if (!recording || ops.size() >= max_ops) return SIZE_MAX;
  ops.push_back({std::string(kind) + " " + name, record(), nullptr, step});
  return ops.size() - 1;
}
void end(size_t k) {
  if (k != SIZE_MAX) ops[k].stop = record();
}
}  // namespace

extern "C" {
void kokkosp_init_library(int, uint64_t, uint32_t, void*) {
  load_cuda();
  if (const char* s = std::getenv("BM_GPU_TIMER_START")) {
    std::string v(s);
    const auto colon = v.rfind(':');
    start_name = v.substr(0, colon);
    start_count = colon == std::string::npos ? 1 : std::atol(v.c_str() + colon + 1);
  } else {
    recording = true;
  }
  if (const char* m = std::getenv("BM_GPU_TIMER_MAX")) max_ops = std::strtoul(m, nullptr, 10);
  ops.reserve(std::min<size_t>(max_ops, 1 << 20));
}
void kokkosp_begin_parallel_for(const char* name, uint32_t, uint64_t* id) {
  *id = next_id++;
  open_ops[*id] = begin("for", name);
}
void kokkosp_begin_parallel_reduce(const char* name, uint32_t, uint64_t* id) {
  *id = next_id++;
  open_ops[*id] = begin("reduce", name);
}
void kokkosp_begin_parallel_scan(const char* name, uint32_t, uint64_t* id) {
  *id = next_id++;
  open_ops[*id] = begin("scan", name);
}
static void end_kernel(uint64_t id) {
  auto it = open_ops.find(id);
  if (it == open_ops.end()) return;
  end(it->second);
  open_ops.erase(it);
}
void kokkosp_end_parallel_for(uint64_t id) { end_kernel(id); }
void kokkosp_end_parallel_reduce(uint64_t id) { end_kernel(id); }
void kokkosp_end_parallel_scan(uint64_t id) { end_kernel(id); }
struct SpaceHandle {
  char name[64];
};
void kokkosp_begin_deep_copy(SpaceHandle, const char* dst, const void*, SpaceHandle, const char* src, const void*,
                             uint64_t bytes) {
  const std::string name = std::string(src) + " -> " + dst + (bytes > (1u << 20) ? " (>1MB)" : "");
  open_copies.push_back(begin("deep_copy", name.c_str()));
}
void kokkosp_end_deep_copy() {
  if (open_copies.empty()) return;
  end(open_copies.back());
  open_copies.pop_back();
}
void kokkosp_finalize_library() {
  const char* path = std::getenv("BM_GPU_TIMER_OUT");
  FILE* f = path ? std::fopen(path, "w") : stderr;
  if (!f) f = stderr;
  // ops complete in issue order on one stream: keep those with both events, in order
  std::vector<Op> done;
  for (auto& o : ops)
    if (o.start && o.stop) done.push_back(o);
  if (!cuda.ok || done.size() < 2) {
    std::fprintf(f, "# bm_gpu_timer: %zu operations recorded (cuda %s)\n", done.size(), cuda.ok ? "ok" : "missing");
    if (f != stderr) std::fclose(f);
    return;
  }
  cuda.event_sync(done.back().stop);
  struct Row {
    double busy = 0, gap = 0;
    long calls = 0;
  };
  std::map<std::string, Row> rows;
  double busy = 0, gaps = 0;
  long steps = 0;
  for (size_t k = 0; k < done.size(); ++k) {
    float ms = 0, gap_ms = 0;
    cuda.elapsed(&ms, done[k].start, done[k].stop);
    if (k > 0) cuda.elapsed(&gap_ms, done[k - 1].stop, done[k].start);
    gap_ms = std::max(gap_ms, 0.0f);  // nested or overlapping host-side brackets
    Row& r = rows[done[k].name];
    r.busy += 1e-3 * ms;
    r.gap += 1e-3 * gap_ms;
    ++r.calls;
    busy += 1e-3 * ms;
    gaps += 1e-3 * gap_ms;
    steps += done[k].step;
  }
  float span_ms = 0;
  cuda.elapsed(&span_ms, done.front().start, done.back().stop);
  const double span = 1e-3 * span_ms;
  const double per = steps > 0 ? 1e6 / steps : 0;
  std::fprintf(f, "# GPU event timer: %zu operations, span %.4f s on the GPU clock", done.size(), span);
  if (steps > 0) std::fprintf(f, ", %ld steps (%.1f us/step, %.1f operations/step)", steps, 1e6 * span / steps,
                              double(done.size()) / steps);
  std::fprintf(f, "\n# inside operations %.4f s (%.1f %%), idle gaps between them %.4f s (%.1f %%)\n", busy,
               100 * busy / span, gaps, 100 * gaps / span);
  if (steps > 0) std::fprintf(f, "# per step: %.1f us inside operations, %.1f us idle\n", busy * per, gaps * per);
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](auto& a, auto& b) { return a.second.busy + a.second.gap > b.second.busy + b.second.gap; });
  std::fprintf(f, "# %10s %10s %8s %10s %10s %6s  %s\n", "busy_s", "gap_s", "calls", "busy_us", "gap_us", "%span",
               "operation (gap = GPU idle right before it)");
  for (auto& r : sorted)
    std::fprintf(f, "  %10.5f %10.5f %8ld %10.2f %10.2f %6.2f  %s\n", r.second.busy, r.second.gap, r.second.calls,
                 1e6 * r.second.busy / std::max(1L, r.second.calls), 1e6 * r.second.gap / std::max(1L, r.second.calls),
                 100 * (r.second.busy + r.second.gap) / span, r.first.c_str());
  if (f != stderr) std::fclose(f);
}
}
