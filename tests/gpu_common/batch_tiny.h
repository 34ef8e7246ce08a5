// Continuous batching of the tiny random models on a device backend (tests/opencl, tests/cuda): a
// BatchSession's caches, one per sequence, in device memory (BackendParams::kv_seqs); every pass's logits
// those of one session per sequence on the same backend (../common/batch_check.h). The float path and an f32
// cache: only the products' row counts differ, so the bound is 1e-4.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "../common/batch_check.h"
#include "compare_greedy.h"
#include "compare_tiny.h"
#include "model/model.h"

namespace tilellm::test {

inline void check_tiny_batch(const std::string& backend, int device) {
  for (const char* arch : {"llama", "gemma3"}) {
    SCOPED_TRACE(arch);
    auto model = Model::load(gpu_tiny_model(arch));
    SessionOptions so = float_options(GgmlType::F32);
    so.backend = backend;
    so.device = device;
    so.n_batch = 32;
    check_batch_against_sessions(*model, so, 1e-4);
  }
}

}  // namespace tilellm::test
