// Reader for the per-op fixtures written by tests/reference/make_op_cases.py (the format is documented at the
// top of that script): one case per file, tests/data/ops/<case>.bin, holding a list of named, typed,
// row-major arrays. A missing or malformed file throws, so a test that needs it fails (never skips).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tilellm::test {

enum class OpDtype : uint32_t { F32 = 0, F64 = 1, I32 = 2, U8 = 3 };

struct OpArray {
  OpDtype dtype = OpDtype::F32;
  std::vector<uint64_t> dims;  // empty for a scalar
  std::vector<uint8_t> bytes;  // count() elements of dtype, little-endian
  size_t count() const {
    size_t n = 1;
    for (uint64_t d : dims) n *= size_t(d);
    return n;
  }
};

class OpCase {
 public:
  static std::string path_of(const std::string& name) {
    return std::string(TILELLM_SOURCE_DIR) + "/tests/data/ops/" + name + ".bin";
  }

  explicit OpCase(const std::string& name) : name_(name) {
    const std::string path = path_of(name);
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("cannot open " + path + " (run tests/reference/make_op_cases.py)");
    bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (take_string(4) != "TLOP") fail("bad magic");
    if (take<uint32_t>() != 1) fail("unsupported version");
    const uint32_t n_arrays = take<uint32_t>();
    for (uint32_t a = 0; a < n_arrays; ++a) {
      const std::string key = take_string(take<uint32_t>());
      OpArray arr;
      arr.dtype = OpDtype(take<uint32_t>());
      if (uint32_t(arr.dtype) > 3) fail("array " + key + " has an unknown dtype");
      const uint32_t ndim = take<uint32_t>();
      for (uint32_t d = 0; d < ndim; ++d) arr.dims.push_back(take<uint64_t>());
      const size_t elem = arr.dtype == OpDtype::F64 ? 8 : arr.dtype == OpDtype::U8 ? 1 : 4;
      arr.bytes.resize(arr.count() * elem);
      take_into(arr.bytes.data(), arr.bytes.size());
      arrays_[key] = std::move(arr);
    }
    if (pos_ != bytes_.size()) fail("trailing bytes");
  }

  const std::string& name() const { return name_; }
  const std::vector<uint64_t>& dims(const std::string& key) const { return get(key).dims; }

  std::vector<float> f32(const std::string& key) const { return typed<float>(key, OpDtype::F32); }
  std::vector<int32_t> i32(const std::string& key) const { return typed<int32_t>(key, OpDtype::I32); }
  std::vector<uint8_t> u8(const std::string& key) const { return typed<uint8_t>(key, OpDtype::U8); }
  // Float arrays of either width, widened to double (references are float64, error scales may be float32).
  std::vector<double> f64(const std::string& key) const {
    const OpArray& a = get(key);
    if (a.dtype == OpDtype::F64) return typed<double>(key, OpDtype::F64);
    std::vector<double> out;
    for (float v : typed<float>(key, OpDtype::F32)) out.push_back(v);
    return out;
  }
  int64_t int_scalar(const std::string& key) const { return scalar(i32(key), key); }
  float f32_scalar(const std::string& key) const { return scalar(f32(key), key); }
  double f64_scalar(const std::string& key) const { return scalar(f64(key), key); }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("op fixture " + name_ + ": " + why);
  }
  const OpArray& get(const std::string& key) const {
    const auto it = arrays_.find(key);
    if (it == arrays_.end()) fail("has no array '" + key + "'");
    return it->second;
  }
  template <typename T>
  std::vector<T> typed(const std::string& key, OpDtype want) const {
    const OpArray& a = get(key);
    if (a.dtype != want) fail("array '" + key + "' has another dtype");
    std::vector<T> out(a.count());
    std::memcpy(out.data(), a.bytes.data(), a.bytes.size());
    return out;
  }
  template <typename T>
  T scalar(const std::vector<T>& v, const std::string& key) const {
    if (v.size() != 1) fail("array '" + key + "' is not a scalar");
    return v[0];
  }
  void take_into(void* dst, size_t len) {
    if (len > bytes_.size() - pos_) fail("truncated");
    std::memcpy(dst, bytes_.data() + pos_, len);
    pos_ += len;
  }
  template <typename T>
  T take() {
    T v;
    take_into(&v, sizeof v);
    return v;
  }
  std::string take_string(size_t len) {
    std::string s(len, '\0');
    take_into(s.data(), len);
    return s;
  }

  std::string name_;
  std::vector<uint8_t> bytes_;
  size_t pos_ = 0;
  std::map<std::string, OpArray> arrays_;
};

}  // namespace tilellm::test
