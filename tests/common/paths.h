// Where tests find the real models: $TILELLM_MODELS_DIR, else models/ in the source tree. A missing model is
// a test failure with the command that fetches it — never a silent skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tilellm::test {

inline const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline const char* kGemma3 = "gemma-3-270m-q4_k_m.gguf";

inline std::string model_path(const std::string& file) {
  const char* env = std::getenv("TILELLM_MODELS_DIR");
  const std::filesystem::path dir =
      env ? std::filesystem::path(env) : std::filesystem::path(TILELLM_SOURCE_DIR) / "models";
  return (dir / file).string();
}

// Use as: ASSERT_MODEL(path);
#define ASSERT_MODEL(path)                   \
  ASSERT_TRUE(std::filesystem::exists(path)) \
      << "model " << (path) << " is missing: run scripts/fetch_models.sh first"

inline std::string source_path(const std::string& rel) {
  return (std::filesystem::path(TILELLM_SOURCE_DIR) / rel).string();
}

}  // namespace tilellm::test
