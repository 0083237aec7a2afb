// Batmobile model file (docs/model.md "Model file", version 1): host-side data, no libtorch and no Kokkos here.
#pragma once
#include <cstddef>
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

// A buffer as stored in the file, the input of the tensors checksum: dtype as PyTorch names it without "torch."
// (float64, float32, int64, uint8, ...), bytes row-major little-endian.
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

// The header's "checksum" against the file's tensors: kVerified (equal), kAbsent (a file written before
// exporters stored one), kNotComputed (validate_model_file was given no tensors_sha256 to compare with).
enum class ChecksumState { kNotComputed, kAbsent, kVerified };

struct ModelFile {
  std::string path;
  ModelHyper hyper;
  std::vector<double> E_ref;
  std::map<std::string, HostTensor> tensors;  // the named buffers (meta.* included)
  std::string tensors_sha256;  // tensors_checksum of the file's buffers (hex), set by the reader
  ChecksumState checksum = ChecksumState::kNotComputed;
};

// SHA-256 of `size` bytes, as 64 lowercase hex digits (FIPS 180-4).
std::string sha256_hex(const unsigned char* data, size_t size);

// The model file's tensors checksum: SHA-256 over every buffer except meta.header_json (which carries it), in
// ascending byte order of the names; each buffer contributes the UTF-8 text "<name>\n<dtype>\n[<d0>,<d1>,...]\n"
// ("[]" for a scalar) followed by its data bytes. python/batmobile/export.py computes the same.
std::string tensors_checksum(std::vector<RawTensor> tensors);

// Number of natural-parity paths (l1, l2, l3) with all l <= L.
int count_paths(int L);

// Reads a `.pt` file with libtorch (torch::jit::load + named_buffers) and validates it.
// Throws std::runtime_error naming the file and the problem (missing, unreadable, wrong format/version/shape).
ModelFile load_model_file(const std::string& path);

// Fills `hyper` from meta.header_json and meta.<key> buffers and checks every tensor shape; compares the header's
// "checksum" ("sha256:<hex>") with mf.tensors_sha256 where that is set (mf.checksum says the outcome). Throws
// std::runtime_error (a checksum mismatch: the weights are corrupted or altered). Split from the torch reader so
// that validation is testable without files.
void validate_model_file(ModelFile& mf, const std::string& header_json);

// Returns the index of each LAMMPS type's species name (-1 for "NULL"); throws on unknown names.
std::vector<int> map_species(const ModelHyper& hyper, const std::vector<std::string>& names);

}  // namespace batmobile
