// tilellm: the command-line front end. Subcommands: run, chat, perplexity, tokenize, dump-logits, bench,
// batched-bench, gemm-speed, gemv-bw, devices, monitor, serve.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "commands.h"
#include "llama_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"TileLLM: on-device LLM inference for GGUF models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tilellm 0.1.0");
  tilellm::cli::register_run(app);
  tilellm::cli::register_chat(app);
  tilellm::cli::register_perplexity(app);
  tilellm::cli::register_tokenize(app);
  tilellm::cli::register_dump_logits(app);
  tilellm::cli::register_gemm_speed(app);
  tilellm::cli::register_gemv_bw(app);
  tilellm::cli::register_bench(app);
  tilellm::cli::register_batched_bench(app);
  tilellm::cli::register_monitor(app);
  tilellm::cli::register_devices(app);
  tilellm::cli::register_serve(app);
  try {
    // llama.cpp's multi-letter options (-ngl, -cnv, -sys, -ctk, -fa, ...) under their long names here.
    const std::vector<std::string> args = tilellm::cli::translate_llama_flags(argc, argv);
    std::vector<std::string> commands;
    for (const CLI::App* s : app.get_subcommands({})) commands.push_back(s->get_name());
    tilellm::cli::check_command(args, commands);
    std::vector<const char*> ptrs;
    for (const std::string& s : args) ptrs.push_back(s.c_str());
    app.parse(int(ptrs.size()), ptrs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tilellm::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  }
  return 0;
}
