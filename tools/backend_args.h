// The backend-selection options shared by the commands that run a model (run, chat, perplexity,
// dump-logits, bench): --backend cpu|opencl, --device N, --device-profile NAME, --prefill gpu|cpu|auto,
// --gpu-memory buffer|image.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "runtime/session.h"

namespace tilellm::cli {

struct BackendArgs {
  std::string backend = "cpu";
  int device = 0;
  std::string device_profile = "none";
  std::string prefill = "gpu";  // OpenCL: where prompt batches run (session.h, PrefillMode)
  std::string gpu_memory;       // OpenCL: buffer|image (backends/gpu_memory.h); empty: not given (buffer)
};

void add_backend_args(CLI::App* app, BackendArgs& a);
void apply_backend_args(const BackendArgs& a, SessionOptions& o);
// "cpu", or "opencl:<device>" with ":<profile>" when one is set: the bench row's backend field.
std::string backend_label(const BackendArgs& a);

}  // namespace tilellm::cli
