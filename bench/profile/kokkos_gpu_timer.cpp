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
//   BM_GPU_TIMER_HOST=1 host clock only, no events (the GPU's pipelining untouched): how long the host spent inside
//                       each operation's Kokkos call (the launch, or a wait where the call blocks: a deep_copy to
//                       the host, a reduction into a host value, Kokkos 3.4's launch of a functor of 512 B or more,
//                       which waits for the previous such kernel) and between operations
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kokkos_tool_abi.hpp"

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
  double host_begin, host_end = -1;  // host clock (us) at the Kokkos call's begin and end callbacks
};
bool host_only = false;
double host_now() {
  return 1e-3 * double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch()).count());
}
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
  if (!cuda.ok && !host_only) return SIZE_MAX;
  const bool step = !start_name.empty() && start_name == name;
  if (!recording && step && ++seen >= start_count) recording = true;
  if (!recording || ops.size() >= max_ops) return SIZE_MAX;
  ops.push_back({std::string(kind) + " " + name, host_only ? nullptr : record(), nullptr, step, host_now()});
  return ops.size() - 1;
}
void end(size_t k) {
  if (k == SIZE_MAX) return;
  if (!host_only) ops[k].stop = record();
  ops[k].host_end = host_now();
}

// One sample per recorded operation: time inside it and time before it since the previous one ended (us).
struct Sample {
  const std::string* name;
  double inside, before;
  bool step;
};

// The table of both modes: totals, per-step figures, and one row per operation name, largest first.
//   clock: "GPU event" or "host clock"; inside / before: what the two times are ("inside operations" / "idle gaps
//   between them" on the GPU, "inside Kokkos calls" / "host code between them" on the host); columns: the two
//   column stems (busy / gap, inside / before); legend: what the second column means
void print_table(FILE* f, const std::vector<Sample>& samples, double span, const char* clock, const char* inside_what,
                 const char* before_what, const char* c_in, const char* c_pre, const char* legend) {
  struct Row {
    double inside = 0, before = 0;
    long calls = 0;
  };
  std::map<std::string, Row> rows;
  double inside = 0, before = 0;
  long steps = 0;
  for (const auto& x : samples) {
    Row& r = rows[*x.name];
    r.inside += x.inside, r.before += x.before, ++r.calls;
    inside += x.inside, before += x.before;
    steps += x.step;
  }
  std::fprintf(f, "# %s timer: %zu operations, span %.4f s", clock, samples.size(), 1e-6 * span);
  if (steps > 0) std::fprintf(f, ", %ld steps (%.1f us/step, %.1f operations/step)", steps, span / steps,
                              double(samples.size()) / steps);
  std::fprintf(f, "\n# %s %.4f s (%.1f %%), %s %.4f s (%.1f %%)\n", inside_what, 1e-6 * inside, 100 * inside / span,
               before_what, 1e-6 * before, 100 * before / span);
  if (steps > 0)
    std::fprintf(f, "# per step: %.1f us %s, %.1f us %s\n", inside / steps, inside_what, before / steps, before_what);
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](auto& a, auto& b) { return a.second.inside + a.second.before > b.second.inside + b.second.before; });
  const std::string s_in = std::string(c_in) + "_s", s_pre = std::string(c_pre) + "_s",
                    u_in = std::string(c_in) + "_us", u_pre = std::string(c_pre) + "_us";
  std::fprintf(f, "# %10s %10s %8s %10s %10s %6s  operation (%s)\n", s_in.c_str(), s_pre.c_str(), "calls",
               u_in.c_str(), u_pre.c_str(), "%span", legend);
  for (auto& r : sorted)
    std::fprintf(f, "  %10.5f %10.5f %8ld %10.2f %10.2f %6.2f  %s\n", 1e-6 * r.second.inside, 1e-6 * r.second.before,
                 r.second.calls, r.second.inside / std::max(1L, r.second.calls),
                 r.second.before / std::max(1L, r.second.calls), 100 * (r.second.inside + r.second.before) / span,
                 r.first.c_str());
}

// BM_GPU_TIMER_HOST=1: per operation the host's time inside its Kokkos call, and the host time before it since the
// previous call returned (LAMMPS, our host code).
void host_report(FILE* f) {
  std::vector<Sample> samples;
  const Op *first = nullptr, *prev = nullptr;
  for (auto& o : ops) {
    if (o.host_end < 0) continue;
    if (!first) first = &o;
    samples.push_back({&o.name, o.host_end - o.host_begin, prev ? std::max(0.0, o.host_begin - prev->host_end) : 0.0,
                       o.step});
    prev = &o;
  }
  if (samples.size() < 2) {
    std::fprintf(f, "# bm_gpu_timer (host clock): %zu operations recorded\n", samples.size());
    return;
  }
  print_table(f, samples, prev->host_end - first->host_begin, "host clock", "inside Kokkos calls",
              "host code between them", "inside", "before", "before = host time since the previous call returned");
}
}  // namespace

extern "C" {
void kokkosp_init_library(int, uint64_t, uint32_t, void*) {
  const char* h = std::getenv("BM_GPU_TIMER_HOST");
  host_only = h && std::strcmp(h, "1") == 0;
  if (!host_only) load_cuda();
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
  if (host_only) {
    host_report(f);
    if (f != stderr) std::fclose(f);
    return;
  }
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
  std::vector<Sample> samples;
  for (size_t k = 0; k < done.size(); ++k) {
    float ms = 0, gap_ms = 0;
    cuda.elapsed(&ms, done[k].start, done[k].stop);
    if (k > 0) cuda.elapsed(&gap_ms, done[k - 1].stop, done[k].start);
    gap_ms = std::max(gap_ms, 0.0f);  // nested or overlapping host-side brackets
    samples.push_back({&done[k].name, 1e3 * ms, 1e3 * gap_ms, done[k].step});
  }
  float span_ms = 0;
  cuda.elapsed(&span_ms, done.front().start, done.back().stop);
  print_table(f, samples, 1e3 * span_ms, "GPU event", "inside operations", "idle gaps between them", "busy", "gap",
              "gap = GPU idle right before it");
  if (f != stderr) std::fclose(f);
}
}
