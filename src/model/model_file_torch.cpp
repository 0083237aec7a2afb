// The only translation unit that includes libtorch: reads the TorchScript archive once at load time.
#include <torch/script.h>

#include <fstream>
#include <stdexcept>

#include "model/model_file.hpp"

namespace batmobile {

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
  for (const auto& nb : module.named_buffers(/*recurse=*/true)) {
    torch::Tensor t = nb.value.contiguous().cpu();
    if (nb.name == "meta.header_json") {
      if (t.scalar_type() != torch::kUInt8 && t.scalar_type() != torch::kInt8)
        throw std::runtime_error(where + "meta.header_json must be a uint8 byte tensor");
      header_json.assign(reinterpret_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
      have_header = true;
      continue;
    }
    if (!t.is_floating_point() && t.scalar_type() != torch::kInt64 && t.scalar_type() != torch::kInt32)
      continue;
    HostTensor ht;
    ht.shape.assign(t.sizes().begin(), t.sizes().end());
    torch::Tensor d = t.to(torch::kFloat64).contiguous();
    ht.values.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    mf.tensors[nb.name] = std::move(ht);
  }
  if (!have_header) throw std::runtime_error(where + "no meta.header_json buffer (not a Batmobile model file)");
  validate_model_file(mf, header_json);
  return mf;
}

}  // namespace batmobile
