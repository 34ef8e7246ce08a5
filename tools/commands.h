// Each subcommand registers itself on the app; its callback runs when it is chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

namespace tilellm::cli {

void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_dump_logits(CLI::App& app);
void register_gemm_speed(CLI::App& app);
void register_gemv_bw(CLI::App& app);
// The gemv-bw benchmark, also run by `gemm-speed speed/GemvBW`.
struct GemvArgs {
  std::string backend = "cpu";  // a name or an MNN number
  int threads = 1;              // host threads
  int device = -1;              // -1: the backend's default_device (registry.h)
  std::string device_profile = "none";
  std::vector<std::string> shapes;  // "K,N"; empty: 14336,4096
  std::string format = "text";
  std::string formats;             // --formats: the weight formats timed, a comma list; empty: MNN's four
  int peak_mib = 0;                // the peak buffers' size; 0: max(4x the cache, 256 MiB)
  std::string isa;                 // --isa: the CPU kernels' instruction set; empty: as it is
  std::string activations = "q8";  // q8 (`run`'s: int8 where integer kernels exist) or f32
  std::map<std::string, std::string> given;  // the backends' own flags given (backend_args.h)
};
void gemv_bw_main(const GemvArgs& a);
void register_bench(CLI::App& app);
// `tilellm batched-bench`: llama-batched-bench's aggregate speeds of B sequences decoded together.
void register_batched_bench(CLI::App& app);
// `tilellm monitor`: a sustained workload under telemetry and pacing, and its HTML report.
void register_monitor(CLI::App& app);
// `tilellm serve`: the OpenAI-compatible HTTP server (tools/serve/).
void register_serve(CLI::App& app);
// `tilellm devices`: every backend, its devices and their capability structs.
void register_devices(CLI::App& app);

// --isa NAME of the benchmarks (base/cpu_isa.h select_cpu_isa; the CPU backend's own --isa for the
// commands that run a model): throws tilellm::Error naming the instruction sets this CPU runs.
void select_isa(const std::string& name);

// The commit this binary was built from: `git describe` at build time, "+dirty" when the tree had changes.
const char* build_commit();

}  // namespace tilellm::cli
