// The GPU backends' program cache: what a driver built from our kernel sources (OpenCL program binaries, a
// Vulkan pipeline cache's data), and the self-check's verdict on them, kept on disk so that the next start
// loads them (clCreateProgramWithBinary, vkCreatePipelineCache) instead of compiling and checking again.
//
// One file per cache key, `<backend>-<16 hex digits>.bin` in the cache directory. The key is a text naming
// everything that can change a binary or its verdict (each backend builds it: e.g. OpenCL's format version,
// platform and device names and versions, driver version, device profile, build options, the full program
// sources with their generated header, the test hook); the file name is a hash of it, and the file holds the
// whole text, compared byte for byte on load, so a hash collision is a mismatch, never a wrong binary.
//
// File layout (host byte order; a file from a host of the other order fails the magic check):
//   [8]  magic "TLCLBIN\0"
//   u32  format version (kFormatVersion), u32 zero
//   u64  key bytes K, u64 body bytes B (the file is exactly 40 + B bytes), u64 hash of the body
//   body: [K] key text, u32 program count, per program (u64 size, [size] binary bytes),
//         u32 checked (1: the self-check ran on these binaries), u32 failed count,
//         per failed kernel (u32 name length, name, f64 its error)
// A file that is short, long, fails the hash or does not parse is "corrupt"; one whose key differs is
// "mismatching": both are reported in one line, rebuilt from source and overwritten, never used. Writes go to
// a temporary file in the same directory that is then renamed over the entry, so a concurrent reader sees the
// old file or the new one, never half of one.
//
// This header needs no GPU API headers: the session's options carry ProgramCacheOptions in every build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tilellm {

struct ProgramCacheOptions {
  enum class Mode {
    Off,      // build from source and run the self-check at every start; nothing on disk
    On,       // load an entry when there is a valid one, else build, check and store one
    Refresh,  // ignore any entry: build from source, run the self-check, store the result
  };
  Mode mode = Mode::Off;
  std::string dir;  // empty: default_cache_dir()
};

// A cache option's value as options: "on" (the default location), "off", "refresh" (rebuild, re-check and
// rewrite the entry) or a directory (on, there). Empty: $env_var (the same values, and 0/1), else on. Throws
// tilellm::Error naming `flag` (or the variable) for anything else.
ProgramCacheOptions parse_cache_option(const std::string& value, const char* flag, const char* env_var);

// $TILELLM_CACHE_DIR, else $XDG_CACHE_HOME/tilellm/<backend>, else $HOME/.cache/tilellm/<backend>; empty when
// none of those variables is set.
std::string default_cache_dir(std::string_view backend);

// The directory the cache options write in: empty when off, the named directory, else default_cache_dir.
std::string cache_files_dir(const ProgramCacheOptions& o, std::string_view backend);

// What is stored under one key.
struct CacheEntry {
  std::vector<std::vector<uint8_t>> binaries;  // one per program, in the order the backend builds them
  bool checked = false;  // the self-check ran on these binaries: `failed` is its verdict
  struct Failed {
    std::string kernel;
    double error;  // relative error the self-check measured
  };
  std::vector<Failed> failed;
};

// A 64-bit hash (FNV-1a over 8-byte words, then the tail bytes). Each step is a bijection of the state, so
// two inputs of the same length that differ in a single word always hash differently: any one flipped byte
// of an entry is caught.
uint64_t cache_hash(const void* data, size_t bytes, uint64_t seed = 0);

// The serialized file for `key` and `e` (what store() writes), and its parse: nullopt with `why` set when the
// bytes are corrupt or made for another key.
std::vector<uint8_t> encode_entry(std::string_view key, const CacheEntry& e);
std::optional<CacheEntry> decode_entry(const std::vector<uint8_t>& file, std::string_view key,
                                       std::string& why);

// One cache key's file in the cache directory.
class ProgramCache {
 public:
  // backend: the files' prefix and default folder ("opencl", "vulkan"); what: the cache's name in messages
  // ("OpenCL program cache").
  ProgramCache(const ProgramCacheOptions& o, std::string key, std::string_view backend,
               std::string_view what);
  // Whether lookups and stores happen at all (off, or no directory could be named).
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // The valid entry for the key; nullopt when the cache is off, in refresh mode, or has no usable entry (a
  // corrupt or mismatching file gets a one-line note on stderr; a missing one is the normal first start).
  std::optional<CacheEntry> load() const;
  // Writes the entry atomically. Failure (an unwritable directory, a full disk) is a one-line warning on
  // stderr, never an error: returns false.
  bool store(const CacheEntry& e) const;

 private:
  ProgramCacheOptions::Mode mode_;
  std::string key_, what_;
  std::string dir_, path_;  // empty when disabled
};

}  // namespace tilellm
