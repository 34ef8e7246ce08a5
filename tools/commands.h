// Each subcommand registers itself on the app; its callback runs when it is chosen.
#pragma once

#include <CLI/CLI.hpp>

namespace tilellm::cli {

void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_dump_logits(CLI::App& app);
void register_gemm_speed(CLI::App& app);
void register_gemv_bw(CLI::App& app);
// The gemv-bw benchmark body, also run by `gemm-speed speed/GemvBW`.
void gemv_bw_main(int threads, const std::vector<std::string>& shapes, const std::string& format);
void register_bench(CLI::App& app);
// `tilellm devices`: every OpenCL device and its capability struct.
void register_devices(CLI::App& app);

// The commit this binary was built from: `git describe` at build time, "+dirty" when the tree had changes.
const char* build_commit();

}  // namespace tilellm::cli
