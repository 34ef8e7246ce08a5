// Tiny random models for the CUDA tests, written once into the temporary folder (tests/common/tiny_model.h):
// hidden size 64, 4 heads over 2 KV heads of 16, feed-forward 96, 3 layers, 67 tokens — whole blocks of 32
// and 64, so that every block format can hold every matrix.
#pragma once

#include <string>

namespace tilellm::test {

// The file's path; arch "llama" or "gemma3".
std::string cuda_tiny_model(const std::string& arch);

}  // namespace tilellm::test
