// A weight matrix as the op interface sees it: a view of rows in one GGML type, wherever they live (the
// mapped GGUF file, or a test's memory). Backends key what they prepare from it (tiles, device copies) by
// its address, so the rows must stay where they are while a backend uses them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "format/ggml_types.h"

namespace tilellm {

// W[n_out][n_in] (GGUF ne = {n_in, n_out}): row r holds the n_in input weights of output r, `row_bytes`
// bytes of `type` blocks, rows contiguous. y = W x.
struct Weight {
  std::string name;
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;
  // data lies in the read-only file mapping of a GGUF file: its pages can be dropped and are read back from
  // the file on the next access. False for weights in ordinary memory (tests, converted copies).
  bool file_mapped = false;
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

// Every weight a model hands its backend at load (Backend::load_weights), so that the backend can prepare
// them once (repack into tiles, upload to a device) before the first op runs.
//   matrices: every matrix the layer loop passes to matmul / matmul_shared / matmul_glu (a tied output
//             matrix is the embedding table itself, and appears here too);
//   embedding: the table embed() looks rows up in (null when there is none);
//   vectors: the norm weights the layer loop passes to rmsnorm / add_rmsnorm, each `n` floats (a vector
//            used by several norms may appear more than once).
struct WeightSet {
  std::vector<const Weight*> matrices;
  const Weight* embedding = nullptr;
  struct Vector {
    const float* data;
    int64_t n;
  };
  std::vector<Vector> vectors;
};

}  // namespace tilellm
