// Batmobile model file (docs/model.md "Model file", versions 1 to 3): host-side data, no libtorch and no Kokkos here.
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
// Format versions read: 1 (checksum over the tensors only, or none; pair_coeff warns), 2 (checksum over the header
// and the tensors), 3 (version 2 plus the product basis, `correlation`; exporters write it only for correlation 2).
constexpr int kOldestFormatVersion = 1;
constexpr int kHeaderChecksumVersion = 2;
constexpr int kNewestFormatVersion = 3;

struct ModelHyper {
  std::vector<std::string> species;
  std::string units = "metal";
  int version = 0;
  std::string batmobile_version;  // the header's "batmobile_version": the Batmobile that wrote the file ("" if absent)
  double r_c = 0, avg_num_neighbors = 0, energy_scale = 0, min_distance = 0;
  int L = 0, C = 0, T = 0, NB = 0, H = 0, A = 0, dk = 0, Hr = 0;
  int correlation = 1;  // 2: the product basis in every layer but the last (docs/model.md step 3)
  int K() const { return (L + 1) * (L + 1); }
  bool has_product(int t) const { return correlation == 2 && t < T - 1; }
};

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;  // row-major, converted to double
};

// A buffer as stored in the file, an input of the checksum: dtype as PyTorch names it without "torch."
// (float64, float32, int64, uint8, ...), bytes row-major little-endian.
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

// The header's "checksum" against the file: kVerified (version 2: header and tensors verified), kWeightsVerified
// (version 1: tensors verified, the header is not covered), kAbsent (version 1 without a checksum), kNotComputed
// (validate_model_file was given no computed checksum to compare with).
enum class ChecksumState { kNotComputed, kAbsent, kWeightsVerified, kVerified };

struct ModelFile {
  std::string path;
  ModelHyper hyper;
  std::vector<double> E_ref;
  std::map<std::string, HostTensor> tensors;  // the named buffers (meta.* included)
  std::string tensors_sha256;  // tensors_checksum of the file's buffers (hex, version 1), set by the reader
  std::string model_sha256;    // model_checksum of the canonical header and the buffers (hex, version 2), set by the
                               // reader where the header ends with its checksum member (split_header)
  ChecksumState checksum = ChecksumState::kNotComputed;
};

// SHA-256 of `size` bytes, as 64 lowercase hex digits (FIPS 180-4).
std::string sha256_hex(const unsigned char* data, size_t size);

// The version-1 checksum, over the tensors only: SHA-256 over every buffer except meta.header_json (which carries
// it), in ascending byte order of the names; each buffer contributes the UTF-8 text
// "<name>\n<dtype>\n[<d0>,<d1>,...]\n" ("[]" for a scalar) followed by its data bytes.
// python/batmobile/export.py computes the same.
std::string tensors_checksum(std::vector<RawTensor> tensors);

// The version-2 checksum (docs/model.md "Model checksum"): SHA-256 over the decimal byte count of the canonical
// header, "\n", the canonical header's bytes, then the tensors exactly as in tensors_checksum.
std::string model_checksum(const std::string& canonical_header, std::vector<RawTensor> tensors);

// A version-2 header as stored ends with its checksum member: `, "checksum": "sha256:<64 lowercase hex>"}`. Sets
// *canonical to the stored text without that member (the JSON object before it, closed by its `}`) and *hex to the
// stored digits; false (nothing set) where the text does not end so.
bool split_header(const std::string& stored, std::string* canonical, std::string* hex);

// Whether (l1, l2, l3) is a natural-parity coupling path: triangle rule and l1 + l2 + l3 even.
inline bool is_natural_parity_path(int l1, int l2, int l3) {
  return l3 >= (l1 > l2 ? l1 - l2 : l2 - l1) && l3 <= l1 + l2 && (l1 + l2 + l3) % 2 == 0;
}
// Number of natural-parity paths (l1, l2, l3) with all l <= L.
int count_paths(int L);
// Number of those with l1 <= l2: the product basis's symmetric paths.
int count_symmetric_paths(int L);

// Reads a `.pt` file with libtorch (torch::jit::load + named_buffers) and validates it.
// Throws std::runtime_error naming the file and the problem (missing, unreadable, wrong format/version/shape).
ModelFile load_model_file(const std::string& path);

// Fills `hyper` from meta.header_json and meta.<key> buffers and checks every tensor shape; compares the header's
// "checksum" ("sha256:<hex>") with mf.model_sha256 (version 2) or mf.tensors_sha256 (version 1) where that is set
// (mf.checksum says the outcome). Throws std::runtime_error (a checksum mismatch: the header or the weights were
// altered; a version-2 header without its checksum member). Split from the torch reader so that validation is
// testable without files.
void validate_model_file(ModelFile& mf, const std::string& header_json);

// Returns the index of each LAMMPS type's species name (-1 for "NULL"); throws on unknown names.
std::vector<int> map_species(const ModelHyper& hyper, const std::vector<std::string>& names);

}  // namespace batmobile
