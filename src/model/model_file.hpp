// Batmobile model file (docs/model.md "Model file", version 1): host-side data, no libtorch and no Kokkos here.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace batmobile {

// Compile-time bounds of the reference node/edge code (per-thread stack arrays); validated at load.
constexpr int kMaxL = 3;
constexpr int kMaxK = (kMaxL + 1) * (kMaxL + 1);
constexpr int kMaxC = 64;
constexpr int kMaxPaths = 23;
constexpr int kMaxNB = 16;
constexpr int kMaxH = 64;
constexpr int kMaxHeads = 8;
constexpr int kMaxAttnWidth = 64;  // A * dk
constexpr int kMaxHr = 64;
constexpr int kFormatVersion = 1;

struct ModelHyper {
  std::vector<std::string> species;
  std::string units = "metal";
  int version = 0;
  double r_c = 0, avg_num_neighbors = 0, energy_scale = 0, min_distance = 0;
  int L = 0, C = 0, T = 0, NB = 0, H = 0, A = 0, dk = 0, Hr = 0;
  int K() const { return (L + 1) * (L + 1); }
};

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;  // row-major, converted to double
};

struct ModelFile {
  std::string path;
  ModelHyper hyper;
  std::vector<double> E_ref;
  std::map<std::string, HostTensor> tensors;  // the named buffers (meta.* included)
};

// Number of natural-parity paths (l1, l2, l3) with all l <= L.
int count_paths(int L);

// Reads a `.pt` file with libtorch (torch::jit::load + named_buffers) and validates it.
// Throws std::runtime_error naming the file and the problem (missing, unreadable, wrong format/version/shape).
ModelFile load_model_file(const std::string& path);

// Fills `hyper` from meta.header_json and meta.<key> buffers and checks every tensor shape. Throws
// std::runtime_error. Split from the torch reader so that validation is testable without files.
void validate_model_file(ModelFile& mf, const std::string& header_json);

// Returns the index of each LAMMPS type's species name (-1 for "NULL"); throws on unknown names.
std::vector<int> map_species(const ModelHyper& hyper, const std::vector<std::string>& names);

}  // namespace batmobile
