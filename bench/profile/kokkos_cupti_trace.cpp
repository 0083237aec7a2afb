// Kokkos profiling-interface library that takes the GPU's own timeline of an MD run through CUPTI's activity API:
// every kernel, memcpy and memset with the GPU's start and end timestamps. Unlike kokkos_gpu_timer.cpp it records
// no events between operations, so small kernels keep their real length and the gaps between them are the GPU's
// real idle time.
//   Build on the GPU machine: g++ -O2 -shared -fPIC -I$CUDA/include -o libbm_cupti_trace.so kokkos_cupti_trace.cpp
//                             -L<dir of libcupti.so> -lcupti -Wl,-rpath,<that dir>
//   Run:   KOKKOS_PROFILE_LIBRARY=/path/libbm_cupti_trace.so lmp -k on g 1 -sf kk ...
// Environment:
//   BM_TRACE_OUT     the table (default stderr)
//   BM_TRACE_CSV     optional: every GPU operation of the last complete step of the window, in order
//   BM_TRACE_START   "name:k": a step begins at each launch of the Kokkos operation `name`; the window runs from its
//                    k-th launch to its last one, so set-up and warm-up steps stay out (e.g. bm_kk_atoms:23)
//   BM_TRACE_LABELS  1: name each GPU operation by the Kokkos operation that launched it. CUPTI then records every
//                    CUDA API call as well, which slows the host several-fold, so the idle time of such a run
//                    is not the real one (the durations are). Default 0: operations are named by their kernel
//                    symbol, steps are found by the host's clock at each launch of `name`, and the host runs at
//                    its normal speed.
//   BM_TRACE_CALLERS 1: a memcpy that no Kokkos operation issued (a raw CUDA copy: no Kokkos label) is named by its
//                    host call stack, "memcpy kind 2 128 B from f1 < f2 < ...", the functions resolved with addr2line.
//                    Costs a stack walk per such copy only.
// The table: the window's steps, the time per step, how much of it the GPU spent in some operation (the union over
// streams) and idle; then per operation name its launches per step, mean duration, time per step and the GPU idle
// time right before it (the GPU had nothing queued: the host was launching or waiting).
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kokkos_tool_abi.hpp"

namespace {
struct Activity {
  uint64_t start, end;
  uint32_t correlation, stream;
  std::string name;  // kernel symbol, or "memcpy ..." / "memset"
  int grid = 0, block = 0, registers = 0;
};

std::vector<Activity> activities;
std::unordered_map<uint32_t, uint64_t> external_of;  // CUDA correlation id -> Kokkos operation id
std::unordered_map<uint64_t, std::string> label_of;  // Kokkos operation id -> "for bm_kk_fill"
std::vector<uint64_t> step_ops;                      // Kokkos ids of the step marker's launches
std::vector<uint64_t> step_host;                     // CUPTI clock on the host at each of those launches
bool labels = false;
std::string start_name;
long start_count = 1;
uint64_t next_id = 1;
int open_ops = 0;  // Kokkos operations begun and not ended
bool callers = false;
std::unordered_map<uint32_t, std::vector<void*>> stack_of;  // CUDA correlation id -> host stack of a raw memcpy
bool ok = false;

#define BM_CUPTI(call)                                                                    \
  do {                                                                                    \
    CUptiResult r_ = (call);                                                              \
    if (r_ != CUPTI_SUCCESS) {                                                            \
      const char* s_ = nullptr;                                                           \
      cuptiGetResultString(r_, &s_);                                                      \
      std::fprintf(stderr, "bm_cupti_trace: %s failed: %s\n", #call, s_ ? s_ : "?");    \
      return false;                                                                       \
    }                                                                                     \
  } while (0)

constexpr size_t kBufferBytes = 8u << 20;
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  // Kokkos kernels: the functor (or the lambda's enclosing function) after ParallelFor< / ParallelReduce< / ...
  for (const char* k : {"ParallelFor<", "ParallelReduce<", "ParallelScan<", "ParallelScanWithTotal<"}) {
    const auto p = s.find(k);
    if (p != std::string::npos) {
      s = std::string(k, std::strlen(k) - 1) + " " + s.substr(p + std::strlen(k));
      break;
    }
  }
  return s.size() > 240 ? s.substr(0, 240) + "..." : s;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
        activities.push_back({k->start, k->end, k->correlationId, k->streamId, short_name(k->name), k->gridX,
                              k->blockX, k->registersPerThread});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
        activities.push_back({m->start, m->end, m->correlationId, m->streamId,
                              "memcpy kind " + std::to_string(int(m->copyKind)) + " " + std::to_string(m->bytes) + " B"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(record);
        activities.push_back({m->start, m->end, m->correlationId, m->streamId, "memset"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        auto* e = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(record);
        if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) external_of[e->correlationId] = e->externalId;
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

// CUPTI API callback: the host stack of each memcpy call outside the Kokkos operations (runtime and driver API: the
// activity record matches one of the two correlation ids).
void CUPTIAPI api_called(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (open_ops > 0 || cb->callbackSite != CUPTI_API_ENTER || !cb->functionName ||
      !std::strstr(cb->functionName, "emcpy"))
    return;
  std::vector<void*> frames(24);
  frames.resize(size_t(backtrace(frames.data(), int(frames.size()))));
  stack_of[cb->correlationId] = std::move(frames);
}

// "function < caller < ..." for a host stack: the frames outside CUDA, CUPTI and this library, resolved with addr2line
// (for executables that export no symbols), at most six.
std::string describe_stack(const std::vector<void*>& frames) {
  static std::map<void*, std::string> cache;
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&describe_stack), &self);
  std::string out;
  int kept = 0;
  for (void* pc : frames) {
    Dl_info info{};
    if (!dladdr(pc, &info) || !info.dli_fname) continue;
    const std::string file = info.dli_fname;
    if (info.dli_fbase == self.dli_fbase || file.find("libcu") != std::string::npos) continue;
    auto hit = cache.find(pc);
    if (hit == cache.end()) {
      char cmd[1200];
      // addr2line takes file addresses: the offset from the load base, except in a non-PIE executable (ELF type 2)
      unsigned short elf_type = 3;
      if (FILE* elf = std::fopen(info.dli_fname, "rb")) {
        if (std::fseek(elf, 16, SEEK_SET) != 0 || std::fread(&elf_type, 2, 1, elf) != 1) elf_type = 3;
        std::fclose(elf);
      }
      const auto base = elf_type == 2 ? 0ul : reinterpret_cast<unsigned long>(info.dli_fbase);
      const auto offset = reinterpret_cast<unsigned long>(pc) - base - 1;  // (the call, not the return address)
      std::snprintf(cmd, sizeof cmd, "addr2line -f -C -e '%s' 0x%lx 2>/dev/null", file.c_str(), offset);
      std::string name;
      if (FILE* p = popen(cmd, "r")) {
        char line[1024];
        if (std::fgets(line, sizeof line, p)) name = line;
        pclose(p);
      }
      if (!name.empty() && name.back() == '\n') name.pop_back();
      if (name.empty() || name == "??") name = file.substr(file.rfind('/') + 1) + "+" + std::to_string(offset);
      const auto paren = name.find('(');  // drop the parameter list
      if (paren != std::string::npos && paren > 0) name = name.substr(0, paren);
      hit = cache.emplace(pc, name).first;
    }
    out += (kept ? " < " : "") + hit->second;
    if (++kept == 6) break;
  }
  return out;
}

bool start_cupti() {
  if (callers) {
    CUpti_SubscriberHandle subscriber;
    BM_CUPTI(cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(api_called), nullptr));
    BM_CUPTI(cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API));
    BM_CUPTI(cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
  }
  BM_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  BM_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  BM_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  BM_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  if (!labels) return true;
  BM_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  // CUPTI emits the external-correlation records with the API records only
  BM_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  BM_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
  return true;
}

void begin(const char* kind, const char* name, uint64_t* id) {
  *id = next_id++;
  label_of[*id] = std::string(kind) + " " + name;
  if (!start_name.empty() && start_name == name) {
    uint64_t t = 0;
    if (ok) cuptiGetTimestamp(&t);
    step_ops.push_back(*id), step_host.push_back(t);
  }
  if (ok && labels) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, *id);
  ++open_ops;
}
void end() {
  --open_ops;
  uint64_t last = 0;
  if (ok && labels) cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

struct Row {
  double busy_us = 0, gap_us = 0;
  long calls = 0;
};

// Name of an activity: its Kokkos operation, else its own symbol (a raw memcpy: and its host call stack).
std::string label(const Activity& a) {
  auto e = external_of.find(a.correlation);
  if (e != external_of.end()) {
    auto l = label_of.find(e->second);
    if (l != label_of.end()) return a.name.rfind("mem", 0) == 0 ? l->second + " (" + a.name + ")" : l->second;
  }
  auto st = stack_of.find(a.correlation);
  if (st != stack_of.end()) return a.name + " from " + describe_stack(st->second);
  return a.name;
}

void report(FILE* f, FILE* csv) {
  std::sort(activities.begin(), activities.end(), [](auto& a, auto& b) { return a.start < b.start; });
  // step starts: the GPU start of the first activity of each marker launch
  std::map<uint64_t, uint64_t> marker_start;  // Kokkos id -> first start
  for (auto& a : activities) {
    auto e = external_of.find(a.correlation);
    if (e == external_of.end()) continue;
    if (!std::binary_search(step_ops.begin(), step_ops.end(), e->second)) continue;
    marker_start.emplace(e->second, a.start);
  }
  std::vector<uint64_t> starts;
  for (size_t k = size_t(std::max(0L, start_count - 1)); k < step_ops.size(); ++k) {
    if (labels) {
      auto m = marker_start.find(step_ops[k]);
      if (m != marker_start.end()) starts.push_back(m->second);
      continue;
    }
    // the first GPU operation that starts after the host launched the marker
    auto a = std::lower_bound(activities.begin(), activities.end(), step_host[k],
                              [](const Activity& x, uint64_t t) { return x.start < t; });
    if (a != activities.end()) starts.push_back(a->start);
  }
  if (starts.size() < 2) {
    std::fprintf(f, "# bm_cupti_trace: %zu activities, %zu external correlations, %zu launches of the step "
                    "marker, %zu in the window with GPU work: no complete step (is BM_TRACE_START right?)\n",
                 activities.size(), external_of.size(), step_ops.size(), starts.size());
    return;
  }
  const uint64_t t0 = starts.front(), t1 = starts.back();
  const long steps = long(starts.size()) - 1;
  std::map<std::string, Row> rows;
  double busy = 0;
  uint64_t covered_to = t0;  // union of busy intervals so far (over streams)
  for (auto& a : activities) {
    if (a.start < t0 || a.start >= t1) continue;
    const uint64_t end = std::min(a.end, t1);
    const double gap = a.start > covered_to ? 1e-3 * double(a.start - covered_to) : 0.0;
    if (end > covered_to) busy += 1e-3 * double(end - std::max(a.start, covered_to));
    covered_to = std::max(covered_to, end);
    Row& r = rows[label(a)];
    r.busy_us += 1e-3 * double(a.end - a.start), r.gap_us += gap, ++r.calls;
  }
  const double span = 1e-3 * double(t1 - t0);
  std::fprintf(f, "# CUPTI timeline: %ld steps, %.1f us per step; GPU busy %.1f us per step (%.1f %%), idle %.1f us\n",
               steps, span / steps, busy / steps, 100 * busy / span, (span - busy) / steps);
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second.busy_us > b.second.busy_us; });
  std::fprintf(f, "# %9s %9s %9s %9s %6s  operation (idle = GPU idle right before it, per step)\n", "per_step",
               "mean_us", "us/step", "idle_us", "%step");
  for (auto& [name, r] : sorted)
    std::fprintf(f, "  %9.2f %9.2f %9.2f %9.2f %6.2f  %s\n", double(r.calls) / steps, r.busy_us / r.calls,
                 r.busy_us / steps, r.gap_us / steps, 100 * r.busy_us / span, name.c_str());
  if (!csv) return;
  const uint64_t s0 = starts[starts.size() - 2], s1 = starts.back();
  std::fprintf(csv, "start_us,duration_us,idle_before_us,stream,grid,block,registers,operation\n");
  uint64_t prev_end = s0;
  for (auto& a : activities) {
    if (a.start < s0 || a.start >= s1) continue;
    const double idle = a.start > prev_end ? 1e-3 * double(a.start - prev_end) : 0.0;
    prev_end = std::max(prev_end, a.end);
    std::string l = label(a);
    std::replace(l.begin(), l.end(), ',', ';');
    std::fprintf(csv, "%.2f,%.2f,%.2f,%u,%d,%d,%d,%s\n", 1e-3 * double(a.start - s0), 1e-3 * double(a.end - a.start),
                 idle, a.stream, a.grid, a.block, a.registers, l.c_str());
  }
}
}  // namespace

extern "C" {
void kokkosp_init_library(int, uint64_t, uint32_t, void*) {
  if (const char* s = std::getenv("BM_TRACE_START")) {
    std::string v(s);
    const auto colon = v.rfind(':');
    start_name = v.substr(0, colon);
    if (colon != std::string::npos) start_count = std::max(1L, std::atol(v.c_str() + colon + 1));
  }
  const char* l = std::getenv("BM_TRACE_LABELS");
  labels = l && std::strcmp(l, "1") == 0;
  const char* c = std::getenv("BM_TRACE_CALLERS");
  callers = c && std::strcmp(c, "1") == 0;
  ok = start_cupti();
}
void kokkosp_begin_parallel_for(const char* name, uint32_t, uint64_t* id) { begin("for", name, id); }
void kokkosp_begin_parallel_reduce(const char* name, uint32_t, uint64_t* id) { begin("reduce", name, id); }
void kokkosp_begin_parallel_scan(const char* name, uint32_t, uint64_t* id) { begin("scan", name, id); }
void kokkosp_end_parallel_for(uint64_t) { end(); }
void kokkosp_end_parallel_reduce(uint64_t) { end(); }
void kokkosp_end_parallel_scan(uint64_t) { end(); }
void kokkosp_begin_deep_copy(SpaceHandle, const char* dst, const void*, SpaceHandle, const char* src, const void*,
                             uint64_t) {
  uint64_t id = 0;
  begin("deep_copy", (std::string(src) + " -> " + dst).c_str(), &id);
}
void kokkosp_end_deep_copy() { end(); }
void kokkosp_finalize_library() {
  if (!ok) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char* path = std::getenv("BM_TRACE_OUT");
  FILE* f = path ? std::fopen(path, "w") : nullptr;
  if (!f) f = stderr;
  const char* csv_path = std::getenv("BM_TRACE_CSV");
  FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  report(f, csv);
  if (csv) std::fclose(csv);
  if (f != stderr) std::fclose(f);
}
}
