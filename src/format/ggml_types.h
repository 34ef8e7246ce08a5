// GGML tensor element types as numbered in the GGUF format, and their block geometry.
// A row of n elements of a block type occupies (n / block_size) * type_size bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tilellm {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

struct TypeTraits {
  std::string_view name;
  int64_t block_size;  // elements per block (1 for plain float types)
  size_t type_size;    // bytes per block
  bool loadable;       // this engine can dequantize / compute with it
};

// Traits of a type id read from a file; nullptr when the id is not a type this engine knows.
const TypeTraits* type_traits(uint32_t type_id);
const TypeTraits& type_traits(GgmlType t);
inline std::string_view type_name(GgmlType t) { return type_traits(t).name; }

// Bytes of one row of n elements; n must be a multiple of the block size.
inline size_t row_size(GgmlType t, int64_t n) {
  const TypeTraits& tr = type_traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

}  // namespace tilellm
