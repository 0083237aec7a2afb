// Validation of a Batmobile model file (header JSON, hyperparameters, tensor shapes). No libtorch here.
#include "model/model_file.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>

namespace batmobile {
namespace {

// Minimal JSON reader for the header object: strings, numbers, booleans, null, arrays and nested objects.
struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  double number = 0;
  std::string str;
  std::vector<JsonValue> items;
  std::map<std::string, JsonValue> fields;
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  JsonValue parse() {
    JsonValue v = value();
    skip_ws();
    if (pos_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("malformed meta.header_json (" + what + " at offset " + std::to_string(pos_) + ")");
  }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() {
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end");
    return s_[pos_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_lit() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') break;
      if (c == '\\') {
        if (pos_ >= s_.size()) fail("bad escape");
        char e = s_[pos_++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'u':  // only ASCII escapes expected in species/units
            if (pos_ + 4 > s_.size()) fail("bad \\u escape");
            out += static_cast<char>(std::stoi(s_.substr(pos_, 4), nullptr, 16));
            pos_ += 4;
            break;
          default: out += e;
        }
      } else {
        out += c;
      }
    }
    return out;
  }
  JsonValue value() {
    JsonValue v;
    char c = peek();
    if (c == '{') {
      v.kind = JsonValue::Object;
      ++pos_;
      if (peek() == '}') { ++pos_; return v; }
      while (true) {
        std::string key = string_lit();
        expect(':');
        v.fields[key] = value();
        if (peek() == ',') { ++pos_; continue; }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Array;
      ++pos_;
      if (peek() == ']') { ++pos_; return v; }
      while (true) {
        v.items.push_back(value());
        if (peek() == ',') { ++pos_; continue; }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = JsonValue::String;
      v.str = string_lit();
      return v;
    }
    if (s_.compare(pos_, 4, "true") == 0) { pos_ += 4; v.kind = JsonValue::Bool; v.number = 1; return v; }
    if (s_.compare(pos_, 5, "false") == 0) { pos_ += 5; v.kind = JsonValue::Bool; return v; }
    if (s_.compare(pos_, 4, "null") == 0) { pos_ += 4; return v; }
    size_t used = 0;
    try {
      v.number = std::stod(s_.substr(pos_, 64), &used);
    } catch (...) {
      fail("bad value");
    }
    pos_ += used;
    v.kind = JsonValue::Number;
    return v;
  }
  const std::string& s_;
  size_t pos_ = 0;
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "(";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ")";
  return o.str();
}

// FIPS 180-4 SHA-256. The round constants and initial state are the first 32 fraction bits of the cube roots of
// the first 64 primes and of the square roots of the first 8 (computed once; double precision is ample).
class Sha256 {
 public:
  Sha256() {
    const auto& c = constants();
    std::copy(c.h0.begin(), c.h0.end(), h_.begin());
  }
  void update(const unsigned char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      block_[fill_++] = p[i];
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
    bits_ += 8 * static_cast<uint64_t>(n);
  }
  void update(const std::string& s) { update(reinterpret_cast<const unsigned char*>(s.data()), s.size()); }
  std::string hex() {
    const uint64_t bits = bits_;
    const unsigned char one = 0x80, zero = 0;
    update(&one, 1);
    while (fill_ != 56) update(&zero, 1);
    unsigned char len[8];
    for (int k = 0; k < 8; ++k) len[k] = static_cast<unsigned char>(bits >> (56 - 8 * k));
    update(len, 8);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (uint32_t w : h_)
      for (int k = 7; k >= 0; --k) out += digits[(w >> (4 * k)) & 15];
    return out;
  }

 private:
  struct Constants {
    std::array<uint32_t, 64> k;
    std::array<uint32_t, 8> h0;
  };
  static const Constants& constants() {
    static const Constants c = [] {
      Constants out{};
      auto frac32 = [](double v) { return static_cast<uint32_t>(std::ldexp(v - std::floor(v), 32)); };
      int found = 0;
      for (int n = 2; found < 64; ++n) {
        bool prime = true;
        for (int d = 2; d * d <= n; ++d) prime &= n % d != 0;
        if (!prime) continue;
        out.k[found] = frac32(std::cbrt(static_cast<double>(n)));
        if (found < 8) out.h0[found] = frac32(std::sqrt(static_cast<double>(n)));
        ++found;
      }
      return out;
    }();
    return c;
  }
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void compress() {
    const auto& k = constants().k;
    uint32_t w[64];
    for (int t = 0; t < 16; ++t)
      w[t] = uint32_t(block_[4 * t]) << 24 | uint32_t(block_[4 * t + 1]) << 16 | uint32_t(block_[4 * t + 2]) << 8 |
             uint32_t(block_[4 * t + 3]);
    for (int t = 16; t < 64; ++t) {
      const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int t = 0; t < 64; ++t) {
      const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[t] + w[t];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    const uint32_t v[8] = {a, b, c, d, e, f, g, h};
    for (int i = 0; i < 8; ++i) h_[i] += v[i];
  }
  std::array<uint32_t, 8> h_{};
  unsigned char block_[64] = {};
  size_t fill_ = 0;
  uint64_t bits_ = 0;
};

}  // namespace

std::string sha256_hex(const unsigned char* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.hex();
}

namespace {
// Feeds the tensors to h as the checksums define them (tensors_checksum).
void hash_tensors(Sha256& h, std::vector<RawTensor> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const RawTensor& a, const RawTensor& b) { return a.name < b.name; });
  for (const auto& t : tensors) {
    std::string head = t.name + "\n" + t.dtype + "\n[";
    for (size_t i = 0; i < t.shape.size(); ++i) head += (i ? "," : "") + std::to_string(t.shape[i]);
    h.update(head + "]\n");
    h.update(t.bytes.data(), t.bytes.size());
  }
}
}  // namespace

std::string tensors_checksum(std::vector<RawTensor> tensors) {
  Sha256 h;
  hash_tensors(h, std::move(tensors));
  return h.hex();
}

std::string model_checksum(const std::string& canonical_header, std::vector<RawTensor> tensors) {
  Sha256 h;
  h.update(std::to_string(canonical_header.size()) + "\n");
  h.update(canonical_header);
  hash_tensors(h, std::move(tensors));
  return h.hex();
}

bool split_header(const std::string& stored, std::string* canonical, std::string* hex) {
  static const std::string head = ", \"checksum\": \"sha256:", tail = "\"}";
  const size_t member = head.size() + 64 + tail.size();
  if (stored.size() < member + 1) return false;
  const size_t at = stored.size() - member;
  if (stored.compare(at, head.size(), head) != 0 || stored.compare(stored.size() - tail.size(), tail.size(), tail) != 0)
    return false;
  const std::string digits = stored.substr(at + head.size(), 64);
  for (char c : digits)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  *canonical = stored.substr(0, at) + "}";
  *hex = digits;
  return true;
}

namespace {
// The header's "checksum" ("sha256:<64 hex digits>") against the checksum the reader computed for the file's
// version (see validate_model_file): version 2 must carry it as the header's last member and it covers the header
// and the tensors; in version 1 it is optional and covers the tensors only.
template <class Field>
void check_checksum(ModelFile& mf, const std::string& header_json, const Field* stored, const std::string& where) {
  const std::string prefix = "sha256:";
  if (mf.hyper.version >= 2) {
    std::string canonical, hex;
    if (!split_header(header_json, &canonical, &hex) || !stored || stored->kind != JsonValue::String ||
        stored->str != prefix + hex)
      throw std::runtime_error(where + "the header of this format-version-" + std::to_string(mf.hyper.version) +
                               " file does not end with its checksum member (, \"checksum\": \"sha256:<64 hex "
                               "digits>\"}): the header was altered; re-export the model file");
    if (mf.model_sha256.empty()) {
      mf.checksum = ChecksumState::kNotComputed;
      return;
    }
    if (hex != mf.model_sha256)
      throw std::runtime_error(where + "the model checksum does not match (stored " + stored->str +
                               ", computed sha256:" + mf.model_sha256 +
                               "): the header (species, cutoff, hyperparameters) or the weights were altered or "
                               "corrupted after export; re-export the model file");
    mf.checksum = ChecksumState::kVerified;
    return;
  }
  if (!stored) {
    mf.checksum = ChecksumState::kAbsent;
    return;
  }
  if (stored->kind != JsonValue::String || stored->str.compare(0, prefix.size(), prefix) != 0 ||
      stored->str.size() != prefix.size() + 64)
    throw std::runtime_error(where + "header 'checksum' is not \"sha256:<64 hex digits>\"");
  if (mf.tensors_sha256.empty()) {
    mf.checksum = ChecksumState::kNotComputed;
    return;
  }
  if (stored->str.substr(prefix.size()) != mf.tensors_sha256)
    throw std::runtime_error(where + "the weights do not match the file's checksum (stored " + stored->str +
                             ", computed sha256:" + mf.tensors_sha256 +
                             "): the weights are corrupted or altered; re-export the model file");
  mf.checksum = ChecksumState::kWeightsVerified;
}
}  // namespace

namespace {
int count_paths_from(int L, bool symmetric) {
  int n = 0;
  for (int l1 = 0; l1 <= L; ++l1)
    for (int l2 = symmetric ? l1 : 0; l2 <= L; ++l2)
      for (int l3 = 0; l3 <= L; ++l3)
        n += is_natural_parity_path(l1, l2, l3);
  return n;
}
}  // namespace

int count_paths(int L) { return count_paths_from(L, false); }
int count_symmetric_paths(int L) { return count_paths_from(L, true); }

void validate_model_file(ModelFile& mf, const std::string& header_json) {
  const std::string where = "Batmobile model file '" + mf.path + "': ";
  JsonValue root;
  try {
    root = JsonParser(header_json).parse();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(where + e.what());
  }
  if (root.kind != JsonValue::Object) throw std::runtime_error(where + "meta.header_json is not a JSON object");
  auto field = [&](const char* k) -> const JsonValue* {
    auto it = root.fields.find(k);
    return it == root.fields.end() ? nullptr : &it->second;
  };
  const JsonValue* fmt = field("format");
  if (!fmt || fmt->kind != JsonValue::String || fmt->str != "batmobile")
    throw std::runtime_error(where + "not a Batmobile model (header 'format' is not \"batmobile\")");
  const JsonValue* ver = field("version");
  if (!ver || ver->kind != JsonValue::Number)
    throw std::runtime_error(where + "header has no numeric 'version'");
  mf.hyper.version = static_cast<int>(ver->number);
  if (ver->number != mf.hyper.version || mf.hyper.version < kOldestFormatVersion ||
      mf.hyper.version > kNewestFormatVersion)
    throw std::runtime_error(where + "unsupported format version " + std::to_string(mf.hyper.version) +
                             " (this build reads versions " + std::to_string(kOldestFormatVersion) + " to " +
                             std::to_string(kNewestFormatVersion) + ")");
  const JsonValue* written_by = field("batmobile_version");
  mf.hyper.batmobile_version = written_by && written_by->kind == JsonValue::String ? written_by->str : "";
  // before anything else is read from the file: an altered header is reported as such, not as what it breaks
  check_checksum(mf, header_json, field("checksum"), where);
  const JsonValue* sp = field("species");
  if (!sp || sp->kind != JsonValue::Array || sp->items.empty())
    throw std::runtime_error(where + "header has no non-empty 'species' list");
  mf.hyper.species.clear();
  for (const auto& s : sp->items) {
    if (s.kind != JsonValue::String || s.str.empty())
      throw std::runtime_error(where + "'species' must be a list of non-empty names");
    mf.hyper.species.push_back(s.str);
  }
  const JsonValue* units = field("units");
  if (!units || units->kind != JsonValue::String) throw std::runtime_error(where + "header has no 'units'");
  mf.hyper.units = units->str;
  if (mf.hyper.units != "metal")
    throw std::runtime_error(where + "units '" + mf.hyper.units + "' are not supported (only 'metal')");

  // Numbers: meta.<key> 0-d buffers, falling back to the header JSON.
  auto number = [&](const std::string& key) -> double {
    auto it = mf.tensors.find("meta." + key);
    if (it != mf.tensors.end()) {
      if (it->second.values.size() != 1)
        throw std::runtime_error(where + "meta." + key + " must be a scalar, has shape " + shape_str(it->second.shape));
      return it->second.values[0];
    }
    const JsonValue* v = field(key.c_str());
    if (v && v->kind == JsonValue::Number) return v->number;
    throw std::runtime_error(where + "missing hyperparameter '" + key + "' (no meta." + key + " buffer)");
  };
  auto integer = [&](const std::string& key, int lo, int hi) -> int {
    double v = number(key);
    if (v != std::floor(v) || v < lo || v > hi)
      throw std::runtime_error(where + "hyperparameter " + key + " = " + std::to_string(v) + " outside [" +
                               std::to_string(lo) + ", " + std::to_string(hi) + "] supported by this build");
    return static_cast<int>(v);
  };
  ModelHyper& h = mf.hyper;
  h.r_c = number("r_c");
  h.L = integer("L", 0, kMaxL);
  h.C = integer("C", 1, kMaxC);
  h.T = integer("T", 1, 64);
  h.NB = integer("NB", 1, kMaxNB);
  h.H = integer("H", 1, kMaxH);
  h.A = integer("A", 1, kMaxHeads);
  h.dk = integer("dk", 1, kMaxAttnWidth);
  h.Hr = integer("Hr", 1, kMaxHr);
  h.avg_num_neighbors = number("avg_num_neighbors");
  h.energy_scale = number("energy_scale");
  h.min_distance = number("min_distance");
  if (!(h.r_c > 0)) throw std::runtime_error(where + "r_c must be positive");
  if (!(h.avg_num_neighbors > 0)) throw std::runtime_error(where + "avg_num_neighbors must be positive");
  if (h.A * h.dk > kMaxAttnWidth)
    throw std::runtime_error(where + "A*dk = " + std::to_string(h.A * h.dk) + " exceeds " + std::to_string(kMaxAttnWidth));
  if (h.C % h.A != 0) throw std::runtime_error(where + "C must be a multiple of A");
  // version 3 names the body order of the node update; older files have none (correlation 1)
  h.correlation = h.version >= 3 ? integer("correlation", 1, 2) : 1;
  if (const JsonValue* stated = field("correlation"); h.version >= 3 && stated && stated->kind == JsonValue::Number &&
                                                       stated->number != h.correlation)
    throw std::runtime_error(where + "the header says correlation " +
                             (stated->number == std::floor(stated->number) ? std::to_string(int64_t(stated->number))
                                                                          : std::to_string(stated->number)) +
                             ", meta.correlation says " + std::to_string(h.correlation) + "; re-export the model file");
  if (h.correlation == 2 && h.T < 2)
    throw std::runtime_error(where + "correlation 2 needs T >= 2 (the last layer has no product basis)");

  const int64_t S = h.species.size(), C = h.C, P = count_paths(h.L), L = h.L;
  auto check = [&](const std::string& name, std::vector<int64_t> shape) {
    auto it = mf.tensors.find(name);
    if (it == mf.tensors.end()) throw std::runtime_error(where + "missing tensor '" + name + "'");
    int64_t n = 1;
    for (auto d : shape) n *= d;
    // A 0-d tensor and a 1-element shape are the same thing for a scalar.
    bool ok = it->second.shape == shape || (shape.empty() && it->second.values.size() == 1);
    if (!ok || static_cast<int64_t>(it->second.values.size()) != n)
      throw std::runtime_error(where + "tensor '" + name + "' has shape " + shape_str(it->second.shape) +
                               ", expected " + shape_str(shape));
    for (double v : it->second.values)
      if (!std::isfinite(v)) throw std::runtime_error(where + "tensor '" + name + "' contains non-finite values");
  };
  check("embed", {S, C});
  check("E_ref", {S});
  check("readout.W1", {h.Hr, C});
  check("readout.b1", {h.Hr});
  check("readout.w2", {h.Hr});
  check("readout.b2", {});
  for (int t = 0; t < h.T; ++t) {
    const std::string p = "layers." + std::to_string(t) + ".";
    check(p + "radial.W1", {h.H, h.NB});
    check(p + "radial.b1", {h.H});
    check(p + "radial.W2", {2 * P * C, h.H});
    check(p + "gate.Wg", {h.A, h.NB});
    check(p + "attn.Wq", {h.A * h.dk, C});
    check(p + "attn.Wk", {h.A * h.dk, C});
    check(p + "mix.Wm0", {C, C});
    check(p + "mix.Wo0", {C, C});
    check(p + "mix.b0", {C});
    if (L > 0) {
      check(p + "mix.Wgm", {L * C, C});
      check(p + "mix.Wgo", {L * C, C});
      check(p + "mix.bg", {L * C});
    }
    for (int l = 1; l <= L; ++l) {
      check(p + "mix.Wm" + std::to_string(l), {C, C});
      check(p + "mix.Wo" + std::to_string(l), {C, C});
    }
    for (int l = 0; l <= L; ++l) {
      check(p + "update.Wu" + std::to_string(l), {C, C});
      check(p + "norm.g" + std::to_string(l), {C});
    }
    if (h.has_product(t)) {
      check(p + "product.wq", {count_symmetric_paths(h.L), C});
      for (int l = 0; l <= L; ++l) check(p + "product.Wp" + std::to_string(l), {C, C});
    }
  }
  mf.E_ref = mf.tensors.at("E_ref").values;
}

std::vector<int> map_species(const ModelHyper& hyper, const std::vector<std::string>& names) {
  std::vector<int> out;
  for (const auto& n : names) {
    if (n == "NULL") { out.push_back(-1); continue; }
    int found = -1;
    for (size_t s = 0; s < hyper.species.size(); ++s)
      if (hyper.species[s] == n) found = static_cast<int>(s);
    if (found < 0) {
      std::string known;
      for (const auto& s : hyper.species) known += (known.empty() ? "" : " ") + s;
      throw std::runtime_error("species '" + n + "' is not in the model (model species: " + known + ")");
    }
    out.push_back(found);
  }
  return out;
}

}  // namespace batmobile

#ifndef BATMOBILE_WITH_TORCH
namespace batmobile {
// Built without libtorch (BATMOBILE_WITH_TORCH=OFF): model files cannot be read; say so instead of failing to link.
ModelFile load_model_file(const std::string& path) {
  throw std::runtime_error("Batmobile model file '" + path +
                           "': this build has no libtorch (BATMOBILE_WITH_TORCH=OFF), model files cannot be read");
}
}  // namespace batmobile
#endif
