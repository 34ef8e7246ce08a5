// The backend-selection options shared by the commands that run a model (run, chat, perplexity,
// dump-logits, bench): --backend cpu|opencl, --device N, --device-profile NAME, --prefill gpu|cpu|auto,
// --cl-cache on|off|refresh|DIR, --gpu-memory buffer|image.
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
  std::string cl_cache;         // OpenCL program cache: on, off, refresh or a directory; empty: see below
  std::string gpu_memory;       // OpenCL: buffer|image (backends/gpu_memory.h); empty: not given (buffer)
};

void add_backend_args(CLI::App* app, BackendArgs& a);
void apply_backend_args(const BackendArgs& a, SessionOptions& o);
// --cl-cache as session options: "on" (the default location), "off", "refresh" (rebuild, re-check and
// rewrite the entry) or a directory (on, there). Empty: $TILELLM_CL_CACHE (the same values, and 0/1), else
// on.
opencl::ProgramCacheOptions program_cache_options(const std::string& cl_cache);
// "cpu", or "opencl:<device>" with ":<profile>" when one is set: the bench row's backend field.
std::string backend_label(const BackendArgs& a);

}  // namespace tilellm::cli
