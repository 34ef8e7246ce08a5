// llama.cpp's multi-letter options mapped to this CLI's names (llama_flags.h).
#include "llama_flags.h"

#include <utility>

#include "base/error.h"

namespace tilellm::cli {
namespace {

// llama-cli / llama-bench spelling -> ours.
const std::pair<const char*, const char*> kFlags[] = {
    {"-ngl", "--n-gpu-layers"}, {"-cnv", "--conversation"}, {"-no-cnv", "--no-conversation"},
    {"-sys", "--system"},       {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"},
    {"-fa", "--flash-attn"},    {"-mmp", "--mmap"},         {"-nkvo", "--no-kv-offload"},
    {"-np", "--parallel"},                                                      // llama-server's slots
    {"-npp", "--npp"},          {"-ntg", "--ntg"},          {"-npl", "--npl"},  // llama-batched-bench's
};

}  // namespace

std::vector<std::string> translate_llama_flags(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [from, to] : kFlags) {
      const std::string f = from;
      if (a == f) {
        a = to;
      } else if (a.rfind(f + "=", 0) == 0) {
        a = std::string(to) + a.substr(f.size());
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

void check_command(const std::vector<std::string>& args, const std::vector<std::string>& commands) {
  if (args.size() < 2 || args[1].empty() || args[1][0] == '-') return;
  for (const std::string& c : commands) {
    if (args[1] == c) return;
  }
  std::string list;
  for (const std::string& c : commands) list += (list.empty() ? "" : ", ") + c;
  fail("unknown command '{}' (commands: {}; tilellm --help)", args[1], list);
}

}  // namespace tilellm::cli
