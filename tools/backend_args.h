// The backend-selection options of the commands that run a model (run, chat, perplexity, dump-logits,
// bench): --backend NAME and --device N for every registered backend (backends/registry.h), the device
// options every GPU backend reads (--device-profile, --gpu-memory, --prefill), and one group of flags per
// backend with its own options (e.g. OpenCL's --cl-cache), shown in --help under the backend's name.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>

#include "runtime/session.h"

namespace tilellm::cli {

struct BackendArgs {
  std::string backend = "cpu";
  int device = -1;  // --device; -1: not given (the backend's default_device, chosen_device below)
  std::string device_profile = "none";
  std::string prefill = "gpu";  // device backends: where prompt batches run (session.h, PrefillMode)
  std::string gpu_memory;       // GPU backends: buffer|image (backends/modes.h); empty: not given (buffer)
  std::string kv_memory;        // GPU backends: buffer|image (backends/modes.h); empty: not given (buffer)
  std::map<std::string, std::string> given;  // backend-group flag -> the value given on the command line
  bool backend_given = false;                // --backend was on the command line
  int n_gpu_layers = -1;                     // llama.cpp's -ngl; -1: not given
  mutable std::string ngl_backend;           // what -ngl chose (resolved, and said, once)
  mutable int default_device = -1;           // the device taken without --device (resolved once)
};

void add_backend_args(CLI::App* app, BackendArgs& a);
// Only the per-backend groups of add_backend_args (for the benchmarks, which have --backend of their own):
// each flag given lands in `given` (flag -> value); a flag the command already has stays the command's.
void add_backend_option_groups(CLI::App* app, std::map<std::string, std::string>& given);
// The chosen backend's options from `given` (every flag of its group, given or at its default); a flag of
// another backend's group is an error naming that backend.
std::shared_ptr<BackendOptions> backend_options_from(const BackendEntry& chosen,
                                                     const std::map<std::string, std::string>& given);
// Fills the session's backend fields, the chosen backend's own options included (every flag of its group,
// given or at its default); a flag of another backend's group is an error naming that backend.
void apply_backend_args(const BackendArgs& a, SessionOptions& o);
// "cpu", or "<backend>:<device>" with ":<profile>" when one is set and "+<memory>" for a GPU backend: the
// bench row's backend field.
std::string backend_label(const BackendArgs& a);
// The device the session runs on: --device, or when it is not given the chosen backend's first device that
// is not emulated on the CPU (registry.h default_device; said on stderr when that is not device 0).
int chosen_device(const BackendArgs& a);
// The chosen device's name as `tilellm devices` lists it (under the profile), or "" for the host backend
// or a device the backend does not list.
std::string device_name(const BackendArgs& a);

// The prompt tokens a forward pass of `backend` takes when -b is not given (BackendEntry::prompt_batch; 64
// for a name this build does not have, which fails later with its reason).
int64_t default_prompt_batch(const std::string& backend);

}  // namespace tilellm::cli
