#include "runtime/prefill_speeds.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/program_cache.h"

namespace tilellm {
namespace {

constexpr const char* kHead = "TLPREFILL 2\n";

std::mutex& kept_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, PrefillSpeeds>& kept() {
  static std::map<std::string, PrefillSpeeds> k;
  return k;
}

bool sane(const PrefillSpeeds& s) {
  return s.tokens > 0 && s.device_tokens > 0 && std::isfinite(s.device_tps) && std::isfinite(s.host_tps) &&
         s.device_tps > 0 && s.host_tps > 0;
}

}  // namespace

std::string prefill_speeds_path(const std::string& key, const std::string& dir) {
  return fmt::format("{}/prefill-{:016x}.txt", dir, cache_hash(key.data(), key.size()));
}

std::string engine_build_identity() {
  Dl_info info{};
  std::string path = "/proc/self/exe";
  if (dladdr(reinterpret_cast<const void*>(&engine_build_identity), &info) != 0 && info.dli_fname &&
      info.dli_fname[0] != '\0')
    path = info.dli_fname;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 && (path = "/proc/self/exe", stat(path.c_str(), &st) != 0))
    return "engine unknown";
  return fmt::format("engine {} {} bytes, modified {}.{:09}", path, static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec));
}

std::optional<PrefillSpeeds> find_prefill_speeds(const std::string& key, const std::string& dir) {
  {
    std::lock_guard<std::mutex> lock(kept_mutex());
    const auto it = kept().find(key);
    if (it != kept().end()) {
      PrefillSpeeds s = it->second;
      s.source = "kept in this process";
      return s;
    }
  }
  if (dir.empty()) return std::nullopt;
  const std::string path = prefill_speeds_path(key, dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string want = std::string(kHead) + key + "\n";
  if (text.compare(0, want.size(), want) != 0) return std::nullopt;
  PrefillSpeeds s;
  long long tokens = 0, device_tokens = 0;
  char tail = 0;
  int used = 0;
  const char* rest = text.c_str() + want.size();
  if (std::sscanf(rest, "speeds %lld %lld %lf %lf%c%n", &tokens, &device_tokens, &s.device_tps, &s.host_tps,
                  &tail, &used) != 5 ||
      tail != '\n' || rest[used] != '\0')
    return std::nullopt;  // the line whole and nothing after it
  s.tokens = tokens;
  s.device_tokens = device_tokens;
  if (!sane(s)) return std::nullopt;
  s.source = path;
  std::lock_guard<std::mutex> lock(kept_mutex());
  kept()[key] = s;
  return s;
}

void keep_prefill_speeds(const std::string& key, const std::string& dir, const PrefillSpeeds& s) {
  {
    std::lock_guard<std::mutex> lock(kept_mutex());
    kept()[key] = s;
  }
  if (dir.empty() || !sane(s)) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = prefill_speeds_path(key, dir);
  const std::string tmp = fmt::format("{}.{}.tmp", path, getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out << kHead << key << "\n"
        << fmt::format("speeds {} {} {:.3f} {:.3f}\n", s.tokens, s.device_tokens, s.device_tps, s.host_tps);
    if (!out.flush()) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace tilellm
