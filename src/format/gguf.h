// GGUF (v2/v3) reader. The file is mapped read-only; metadata is parsed into GgufValue records whose strings
// and arrays point into the mapping, and tensor records point at their bytes in the mapping.
//
// File layout (little-endian):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv   x { string key | u32 value_type | value }          string = u64 length + bytes (no NUL)
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   padding to `general.alignment` (default 32) | tensor data (each offset relative to here, aligned)
//
// Every read is bounds-checked; any inconsistency throws tilellm::Error naming the file, the key or tensor,
// and why.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/ggml_types.h"

namespace tilellm {

enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

std::string_view gguf_type_name(GgufType t);

struct GgufValue {
  GgufType type = GgufType::UINT8;
  // Scalars: integers land in `i` (and `u` for unsigned), floats in `f`, bools in `i` (0/1).
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0.0;
  std::string_view str;  // STRING: points into the mapping
  // ARRAY: element type and count; numeric elements stay packed in the mapping at array_data,
  // string elements are listed in `strings` (views into the mapping).
  GgufType elem_type = GgufType::UINT8;
  uint64_t count = 0;
  const uint8_t* array_data = nullptr;
  std::vector<std::string_view> strings;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] is the contiguous dimension (a row); ne[1] counts rows
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;            // relative to the start of the data section
  const uint8_t* data = nullptr;  // in the mapping
  size_t nbytes = 0;
  int64_t nelements() const;
  int64_t rows() const { return nelements() / ne[0]; }
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws tilellm::Error on any problem.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t file_size() const { return size_; }
  size_t alignment() const { return alignment_; }
  // The whole mapped file, file_size() bytes (what a fingerprint of the file reads).
  const uint8_t* bytes() const { return base_; }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. The *_or forms return the fallback when the key is absent; every form throws when the key
  // is present with an incompatible type, and the required forms throw when it is missing.
  std::string get_string(std::string_view key) const;
  std::optional<std::string> get_string_opt(std::string_view key) const;
  int64_t get_int(std::string_view key) const;  // any integer type (and bool)
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;  // float or integer types
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;  // float32/float64 arrays
  std::vector<int64_t> get_int_array(std::string_view key) const;  // integer or bool arrays

  // Tensors, in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  void parse();
  [[noreturn]] void fail_key(std::string_view key, std::string_view why) const;

  std::string path_;
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tilellm
