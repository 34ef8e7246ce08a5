// A model file's identity for the files a session keeps beside it (saved sessions, --prefill auto's speeds).
#pragma once

#include <cstdint>

namespace tilellm {

class Model;

// Identifies a model file without reading all its weights: the file's metadata and tensor table byte for
// byte (everything before the first tensor's data), and the first and last 4 KiB of every tensor's data
// (two fine-tunes of one architecture differ there, while their headers may be identical). XXH3-64.
uint64_t model_fingerprint(const Model& m);

}  // namespace tilellm
