// --prefill auto's measurement: how fast prompt batches run on the device and on the host's tiles, kept
// so that later sessions of the same model, backend, device and modes reuse it instead of timing again.
//
// Kept in the process (every session made after the first) and in a file beside the GPU backends' program
// cache (Backend::files_dir: none when that cache is off, as it is by default for a backend a library or a
// test makes): `prefill-<16 hex digits>.txt`, the
// digits a hash of the key text, the file holding
//   TLPREFILL 2
//   <the key text, one or more lines>
//   speeds <host batch> <device batch> <device tokens/s> <host tokens/s>
// A file whose key differs (a hash collision) or that does not parse is measured again and rewritten. Writes
// go to a temporary file renamed over the entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tilellm {

struct PrefillSpeeds {
  int64_t tokens = 0;         // the host's timed batch
  int64_t device_tokens = 0;  // the device's timed batch (its speed there)
  double device_tps = 0.0, host_tps = 0.0;
  std::string source;  // "measured", "kept in this process", or the file it was read from
  bool host_faster() const { return host_tps > device_tps; }
};

// The speeds kept for `key` (this process first, then the file in `dir`; empty dir: no file).
std::optional<PrefillSpeeds> find_prefill_speeds(const std::string& key, const std::string& dir);
// Keeps s for `key` in the process and, when dir is not empty, in its file there (a write that fails
// leaves no file and is not an error: the next process measures again).
void keep_prefill_speeds(const std::string& key, const std::string& dir, const PrefillSpeeds& s);
// The file `key` is kept in under dir.
std::string prefill_speeds_path(const std::string& key, const std::string& dir);
// The engine's own build, for the key: the path, size and modification time of the binary this code is in
// (the program, or libtilellm.so), so that speeds measured by another build of the kernels are not reused.
std::string engine_build_identity();

}  // namespace tilellm
