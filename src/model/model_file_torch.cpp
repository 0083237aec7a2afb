// The only translation unit that includes libtorch: reads the TorchScript archive once at load time.
#include <torch/script.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <stdexcept>

#include "model/model_file.hpp"

namespace batmobile {
namespace {

// PyTorch's name of a dtype without "torch." (what python/batmobile/export.py hashes); empty if not covered.
std::string dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat64: return "float64";
    case torch::kFloat32: return "float32";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kInt64: return "int64";
    case torch::kInt32: return "int32";
    case torch::kInt16: return "int16";
    case torch::kInt8: return "int8";
    case torch::kUInt8: return "uint8";
    case torch::kBool: return "bool";
    default: return "";
  }
}

// The stored bytes of a contiguous CPU tensor, little-endian whatever the host's byte order.
RawTensor raw_tensor(const std::string& name, const torch::Tensor& t, const std::string& where) {
  RawTensor r;
  r.name = name;
  r.dtype = dtype_name(t.scalar_type());
  if (r.dtype.empty())
    throw std::runtime_error(where + "tensor '" + name + "' has a dtype the checksum does not cover (" +
                             std::string(c10::toString(t.scalar_type())) + ")");
  r.shape.assign(t.sizes().begin(), t.sizes().end());
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  const size_t width = t.element_size(), n = static_cast<size_t>(t.numel()) * width;
  r.bytes.assign(p, p + n);
  const uint16_t probe = 1;
  if (*reinterpret_cast<const unsigned char*>(&probe) != 1)
    for (size_t e = 0; e < n; e += width) std::reverse(r.bytes.begin() + e, r.bytes.begin() + e + width);
  return r;
}

}  // namespace

ModelFile load_model_file(const std::string& path) {
  ModelFile mf;
  mf.path = path;
  const std::string where = "Batmobile model file '" + path + "': ";
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw std::runtime_error(where + "cannot open (missing or unreadable)");
  }
  torch::jit::script::Module module;
  try {
    module = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    throw std::runtime_error(where + "not a readable TorchScript archive (corrupt or truncated?): " + msg);
  }
  std::string header_json;
  bool have_header = false;
  std::vector<RawTensor> raw;  // every buffer but the header: what the checksum covers
  for (const auto& nb : module.named_buffers(/*recurse=*/true)) {
    torch::Tensor t = nb.value.contiguous().cpu();
    if (nb.name == "meta.header_json") {
      if (t.scalar_type() != torch::kUInt8 && t.scalar_type() != torch::kInt8)
        throw std::runtime_error(where + "meta.header_json must be a uint8 byte tensor");
      header_json.assign(reinterpret_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
      have_header = true;
      continue;
    }
    raw.push_back(raw_tensor(nb.name, t, where));
    if (!t.is_floating_point() && t.scalar_type() != torch::kInt64 && t.scalar_type() != torch::kInt32)
      continue;
    HostTensor ht;
    ht.shape.assign(t.sizes().begin(), t.sizes().end());
    torch::Tensor d = t.to(torch::kFloat64).contiguous();
    ht.values.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    mf.tensors[nb.name] = std::move(ht);
  }
  if (!have_header) throw std::runtime_error(where + "no meta.header_json buffer (not a Batmobile model file)");
  // both versions' checksums (the header says which applies; hashing twice costs milliseconds)
  std::string canonical, stored_hex;
  if (split_header(header_json, &canonical, &stored_hex)) mf.model_sha256 = model_checksum(canonical, raw);
  mf.tensors_sha256 = tensors_checksum(std::move(raw));
  validate_model_file(mf, header_json);
  return mf;
}

}  // namespace batmobile
