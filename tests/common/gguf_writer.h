// A small GGUF v3 writer for tests: builds valid files (and, by editing the bytes, broken ones) without any
// dependency. Tensors are laid out in the order added, each at an offset aligned to 32 bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace tilellm::test {

class GgufWriter {
 public:
  void kv_u32(const std::string& k, uint32_t v) { key(k, 4), pod(v); }
  void kv_i32(const std::string& k, int32_t v) { key(k, 5), pod(v); }
  void kv_f32(const std::string& k, float v) { key(k, 6), pod(v); }
  void kv_bool(const std::string& k, bool v) { key(k, 7), pod(uint8_t(v)); }
  void kv_str(const std::string& k, const std::string& v) { key(k, 8), str(v); }
  void kv_u64(const std::string& k, uint64_t v) { key(k, 10), pod(v); }
  void kv_f64(const std::string& k, double v) { key(k, 12), pod(v); }
  void kv_strs(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9), pod(uint32_t(8)), pod(uint64_t(v.size()));
    for (const auto& s : v) str(s);
  }
  void kv_f32s(const std::string& k, const std::vector<float>& v) {
    key(k, 9), pod(uint32_t(6)), pod(uint64_t(v.size()));
    for (float x : v) pod(x);
  }
  void kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9), pod(uint32_t(5)), pod(uint64_t(v.size()));
    for (int32_t x : v) pod(x);
  }
  // Adds a tensor with raw bytes of ggml type `type` and dims ne (ne[0] contiguous).
  void tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
              const std::vector<uint8_t>& bytes) {
    tensors_.push_back({name, ne, type, bytes});
  }
  void tensor_f32(const std::string& name, const std::vector<uint64_t>& ne, const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    tensor(name, ne, 0, b);
  }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    // resize + memcpy rather than insert, whose inlined form GCC 12 misreads as an overflow
    // (-Wstringop-overflow) in some programs.
    auto put = [&out](const void* p, size_t n) {
      const size_t at = out.size();
      out.resize(at + n);
      if (n > 0) std::memcpy(out.data() + at, p, n);
    };
    const uint32_t magic = 0x46554747, version = 3;
    const uint64_t nt = tensors_.size(), nkv = n_kv_;
    put(&magic, 4), put(&version, 4), put(&nt, 8), put(&nkv, 8);
    put(kv_.data(), kv_.size());
    uint64_t off = 0;
    std::vector<uint64_t> offs;
    for (const auto& t : tensors_) {
      const uint64_t len = t.name.size();
      put(&len, 8), put(t.name.data(), len);
      const uint32_t nd = uint32_t(t.ne.size());
      put(&nd, 4);
      for (uint64_t d : t.ne) put(&d, 8);
      put(&t.type, 4), put(&off, 8);
      offs.push_back(off);
      off = (off + t.data.size() + 31) / 32 * 32;
    }
    out.resize((out.size() + 31) / 32 * 32, 0);
    const size_t base = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(base + offs[i], 0);
      put(tensors_[i].data.data(), tensors_[i].data.size());
    }
    return out;
  }
  void write(const std::string& path) const { write_bytes(path, bytes()); }
  static void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::vector<uint8_t> data;
  };
  template <typename V>
  void pod(V v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    kv_.insert(kv_.end(), p, p + sizeof v);
  }
  void str(const std::string& s) {
    pod(uint64_t(s.size()));
    kv_.insert(kv_.end(), s.begin(), s.end());
  }
  void key(const std::string& k, uint32_t type) {
    ++n_kv_;
    str(k);
    pod(type);
  }
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

}  // namespace tilellm::test
