// The GPU backends' program cache files: naming, the entry format, atomic writes (see program_cache.h).
#include "backends/program_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "base/error.h"

namespace tilellm {
namespace {

constexpr char kMagic[8] = {'T', 'L', 'C', 'L', 'B', 'I', 'N', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 40;  // magic, version, zero, key bytes, body bytes, body hash
// Larger files are not read: no program of ours comes near (PoCL's whole binary is a few MiB), so a size
// this large means a damaged or foreign file.
constexpr uint64_t kMaxFileBytes = uint64_t(1) << 30;

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof v);
}

// Bounds-checked reads from a byte range; any read past the end sets `bad` and yields zeros.
struct Reader {
  const uint8_t* p;
  size_t left;
  bool bad = false;
  bool take(void* dst, size_t n) {
    if (bad || n > left) {
      bad = true;
      return false;
    }
    std::memcpy(dst, p, n);
    p += n;
    left -= n;
    return true;
  }
  template <typename T>
  T get() {
    T v{};
    take(&v, sizeof v);
    return v;
  }
};

std::string hex64(uint64_t h) {
  return fmt::format("{:016x}", h);
}

}  // namespace

ProgramCacheOptions parse_cache_option(const std::string& value, const char* flag, const char* env_var) {
  using Mode = ProgramCacheOptions::Mode;
  std::string v = value;
  const char* where = flag;
  if (v.empty()) {
    const char* e = std::getenv(env_var);
    v = e && *e ? e : "on";
    where = env_var;
  }
  ProgramCacheOptions c;
  if (v == "on" || v == "1") {
    c.mode = Mode::On;
  } else if (v == "off" || v == "0") {
    c.mode = Mode::Off;
  } else if (v == "refresh") {
    c.mode = Mode::Refresh;
  } else if (v.find('/') != std::string::npos || v == ".") {
    c.mode = Mode::On;
    c.dir = v;
  } else {
    // A bare word is more likely a mistyped mode than a directory in the working directory.
    fail("{}: '{}' is not on, off, refresh or a directory (write ./{} for one here)", where, v, v);
  }
  return c;
}

std::string default_cache_dir(std::string_view backend) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (std::string d = env("TILELLM_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/tilellm/" + std::string(backend);
  if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/tilellm/" + std::string(backend);
  return "";
}

std::string cache_files_dir(const ProgramCacheOptions& o, std::string_view backend) {
  if (o.mode == ProgramCacheOptions::Mode::Off) return "";
  return o.dir.empty() ? default_cache_dir(backend) : o.dir;
}

uint64_t cache_hash(const void* data, size_t bytes, uint64_t seed) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  const auto* p = static_cast<const uint8_t*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kPrime;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * kPrime;
  // The length last, so inputs that differ only by trailing zero bytes differ too.
  return (h ^ uint64_t(bytes)) * kPrime;
}

std::vector<uint8_t> encode_entry(std::string_view key, const CacheEntry& e) {
  std::vector<uint8_t> body;
  put_bytes(body, key.data(), key.size());
  put(body, uint32_t(e.binaries.size()));
  for (const std::vector<uint8_t>& b : e.binaries) {
    put(body, uint64_t(b.size()));
    put_bytes(body, b.data(), b.size());
  }
  put(body, uint32_t(e.checked ? 1 : 0));
  put(body, uint32_t(e.failed.size()));
  for (const CacheEntry::Failed& f : e.failed) {
    put(body, uint32_t(f.kernel.size()));
    put_bytes(body, f.kernel.data(), f.kernel.size());
    put(body, f.error);
  }
  std::vector<uint8_t> file;
  file.reserve(kHeaderBytes + body.size());
  put_bytes(file, kMagic, sizeof kMagic);
  put(file, kFormatVersion);
  put(file, uint32_t(0));
  put(file, uint64_t(key.size()));
  put(file, uint64_t(body.size()));
  put(file, cache_hash(body.data(), body.size()));
  put_bytes(file, body.data(), body.size());
  return file;
}

std::optional<CacheEntry> decode_entry(const std::vector<uint8_t>& file, std::string_view key,
                                       std::string& why) {
  Reader hdr{file.data(), file.size()};
  char magic[8];
  if (!hdr.take(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) {
    why = file.size() < kHeaderBytes ? "truncated" : "not a TileLLM cache file";
    return std::nullopt;
  }
  const uint32_t version = hdr.get<uint32_t>(), zero = hdr.get<uint32_t>();
  const uint64_t key_bytes = hdr.get<uint64_t>(), body_bytes = hdr.get<uint64_t>(),
                 body_hash = hdr.get<uint64_t>();
  if (hdr.bad) {
    why = "truncated";
    return std::nullopt;
  }
  if (version != kFormatVersion || zero != 0) {
    why = fmt::format("format version {} (this build writes {})", version, kFormatVersion);
    return std::nullopt;
  }
  if (body_bytes != file.size() - kHeaderBytes) {
    why = fmt::format("{} bytes where its header says {}", file.size(), kHeaderBytes + body_bytes);
    return std::nullopt;
  }
  const uint8_t* body = file.data() + kHeaderBytes;
  if (cache_hash(body, body_bytes) != body_hash) {
    why = "hash mismatch";
    return std::nullopt;
  }
  if (key_bytes != key.size() || std::memcmp(body, key.data(), key.size()) != 0) {
    why = "made for another device, driver, profile or source";
    return std::nullopt;
  }
  Reader r{body + key_bytes, size_t(body_bytes - key_bytes)};
  CacheEntry e;
  const uint32_t n_prog = r.get<uint32_t>();
  for (uint32_t i = 0; i < n_prog && !r.bad; ++i) {
    const uint64_t n = r.get<uint64_t>();
    if (n > r.left) r.bad = true;
    if (r.bad) break;
    e.binaries.emplace_back(r.p, r.p + n);
    r.p += n;
    r.left -= size_t(n);
  }
  e.checked = r.get<uint32_t>() != 0;
  const uint32_t n_failed = r.get<uint32_t>();
  for (uint32_t i = 0; i < n_failed && !r.bad; ++i) {
    CacheEntry::Failed f;
    const uint32_t n = r.get<uint32_t>();
    if (n > r.left) r.bad = true;
    if (r.bad) break;
    f.kernel.assign(reinterpret_cast<const char*>(r.p), n);
    r.p += n;
    r.left -= n;
    f.error = r.get<double>();
    e.failed.push_back(std::move(f));
  }
  if (r.bad || r.left != 0) {
    why = "malformed body";
    return std::nullopt;
  }
  return e;
}

ProgramCache::ProgramCache(const ProgramCacheOptions& o, std::string key, std::string_view backend,
                           std::string_view what)
    : mode_(o.mode), key_(std::move(key)), what_(what) {
  if (o.mode == ProgramCacheOptions::Mode::Off) return;
  dir_ = o.dir.empty() ? default_cache_dir(backend) : o.dir;
  if (dir_.empty()) {
    std::fprintf(
        stderr,
        "warning: %s: no directory ($TILELLM_CACHE_DIR, $XDG_CACHE_HOME and $HOME are unset); programs "
        "are built from source\n",
        what_.c_str());
    return;
  }
  path_ = dir_ + "/" + std::string(backend) + "-" + hex64(cache_hash(key_.data(), key_.size())) + ".bin";
}

std::optional<CacheEntry> ProgramCache::load() const {
  if (!enabled() || mode_ == ProgramCacheOptions::Mode::Refresh) return std::nullopt;
  std::ifstream in(path_, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;  // no entry yet: the first start on this device
  const std::streamoff size = in.tellg();
  std::string why;
  std::optional<CacheEntry> e;
  if (size < 0 || uint64_t(size) > kMaxFileBytes) {
    why = fmt::format("size {} is not that of an entry", int64_t(size));
  } else {
    std::vector<uint8_t> file(static_cast<size_t>(size));
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(file.data()), size)) {
      why = "unreadable";
    } else {
      e = decode_entry(file, key_, why);
    }
  }
  if (!e)
    std::fprintf(stderr, "note: %s: %s: %s; rebuilding it\n", what_.c_str(), path_.c_str(), why.c_str());
  return e;
}

bool ProgramCache::store(const CacheEntry& e) const {
  if (!enabled()) return false;
  auto warn = [this](const std::string& why) {
    std::fprintf(stderr,
                 "warning: %s: cannot write %s (%s); programs are built from source at the next start too\n",
                 what_.c_str(), path_.c_str(), why.c_str());
    return false;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return warn(ec.message());
  const std::vector<uint8_t> file = encode_entry(key_, e);
  // A temporary file in the same directory (so the rename cannot cross file systems), renamed over the entry:
  // rename() replaces it atomically, so readers see the old entry or the new one, never a partial one.
  std::string tmp = path_ + ".tmp-XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return warn(std::strerror(errno));
  size_t done = 0;
  while (done < file.size()) {
    const ssize_t n = ::write(fd, file.data() + done, file.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  const int write_errno = done == file.size() ? 0 : (errno ? errno : EIO);
  if (::close(fd) != 0 || write_errno != 0) {
    const std::string why = std::strerror(write_errno ? write_errno : errno);
    ::unlink(tmp.c_str());
    return warn(why);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return warn(why);
  }
  return true;
}

}  // namespace tilellm
