#include "tiny_files.h"

#include <filesystem>

#include "../common/tiny_model.h"

namespace tilellm::test {

std::string cuda_tiny_model(const std::string& arch) {
  TinySpec s;
  s.arch = arch;
  s.n_embd = 64;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_layer = 3;
  s.seed = arch == "llama" ? 7 : 8;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tilellm_cuda_tiny_" + arch + ".gguf")).string();
  tiny_model(s).write(path);
  return path;
}

}  // namespace tilellm::test
