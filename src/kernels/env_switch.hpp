// Integer settings from the environment, read strictly (std::atoi read "abc" as 0 and "1x" as 1); the kernel
// benchmark's (bench/kernels_bench.cpp), not the model's or the pair styles'.
//   env_switch(name, ok, expected)  nothing if `name` is unset; its value if it is a whole decimal number that `ok`
//                                   accepts; otherwise std::invalid_argument "NAME must be EXPECTED".
#pragma once
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

namespace batmobile {
namespace kernels {

template <class Ok>
std::optional<int> env_switch(const char* name, Ok ok, const char* expected) {
  const char* raw = std::getenv(name);
  if (!raw) return std::nullopt;
  const std::string v(raw);
  const bool digits = !v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || !ok(std::stoi(v))) throw std::invalid_argument(std::string(name) + " must be " + expected);
  return std::stoi(v);
}

}  // namespace kernels
}  // namespace batmobile
