#include "backends/registry.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "base/error.h"

namespace tilellm {
namespace {

std::vector<BackendEntry>& entries() {
  static std::vector<BackendEntry> e;  // filled at start-up, read-only afterwards
  return e;
}

// MNN's backend numbers that this build may lack, and why a user would not find them here.
struct Absent {
  int mnn_type;
  const char* name;
  const char* why;
};
constexpr Absent kAbsent[] = {
    {0, "cpu", "the host backend is missing from this build"},
    {1, "metal", "Metal is Apple's GPU API and does not exist on Linux"},
    {2, "cuda", "it was built without the CUDA backend (CMake found no nvcc, or TILELLM_WITH_CUDA was off)"},
    {3, "opencl",
     "it was built without the OpenCL backend (CMake found no CL/cl.h, or TILELLM_WITH_OPENCL was off)"},
    {7, "vulkan",
     "it was built without the Vulkan backend (CMake found no vulkan/vulkan.h or glslc, or "
     "TILELLM_WITH_VULKAN was off)"},
};

const Absent* absent_by_name(std::string_view name) {
  for (const Absent& a : kAbsent)
    if (name == a.name) return &a;
  return nullptr;
}

// "cpu (0) and opencl (3, unavailable here: no OpenCL platform)".
std::string built_list() {
  std::string s;
  const std::vector<const BackendEntry*> all = backends();
  for (size_t i = 0; i < all.size(); ++i) {
    const BackendEntry& e = *all[i];
    if (i > 0) s += i + 1 == all.size() ? " and " : ", ";
    s += fmt::format("{} ({}", e.name, e.mnn_type);
    const std::string why = e.unavailable ? e.unavailable() : std::string();
    if (!why.empty()) s += ", unavailable here: " + why;
    s += ")";
  }
  return s;
}

}  // namespace

void take_session(const BackendParams& p, DeviceOptions& o) {
  o.device = p.device;
  o.max_tokens = p.max_tokens;
  o.max_in_elems = p.max_in_elems;
  o.max_out_elems = p.max_out_elems;
  o.max_width = p.max_width;
  o.weights = p.weights;
  o.kv_layers = p.kv_layers;
  o.kv_ctx = p.kv_ctx;
  o.kv_dim = p.kv_dim;
  o.kv_seqs = p.kv_seqs;
  o.kv_type = p.kv_type;
  o.self_check = p.self_check;
  o.profiling = p.profiling;
  o.resident = p.resident;
}

OptionSpec number_option(std::string flag, std::string help, NumberRange range,
                         std::function<void(BackendOptions&, int)> store) {
  OptionSpec o;
  o.flag = std::move(flag);
  o.help = std::move(help);
  o.default_value = "auto";
  o.set = [name = o.flag, range, store = std::move(store)](BackendOptions& opts, const std::string& v) {
    if (v == "auto") return store(opts, range.auto_value);
    if (v == "off" && range.off_value) return store(opts, *range.off_value);
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < range.lo || n > range.hi || (range.pow2 && (n & (n - 1)))) {
      fail("{}: '{}' is not auto{} or {} from {} to {}", name, v, range.off_value ? ", off" : "",
           range.pow2 ? "a power of two" : "a number", range.lo, range.hi);
    }
    store(opts, int(n));
  };
  return o;
}

OptionSpec switch_option(std::string flag, std::string help, std::string yes, std::string no,
                         bool yes_default, std::function<void(BackendOptions&, bool)> store) {
  OptionSpec o;
  o.flag = std::move(flag);
  o.help = std::move(help);
  o.default_value = yes_default ? yes : no;
  o.choices = yes_default ? std::vector<std::string>{yes, no} : std::vector<std::string>{no, yes};
  o.set = [name = o.flag, words = o.choices, yes, store = std::move(store)](BackendOptions& opts,
                                                                            const std::string& v) {
    if (v != words[0] && v != words[1]) fail("{}: '{}' is not {} or {}", name, v, words[0], words[1]);
    store(opts, v == yes);
  };
  return o;
}

StartTimes time_cold_and_warm_start(const ProgramCacheOptions& cache,
                                    const std::function<bool(const ProgramCacheOptions&)>& start) {
  using Mode = ProgramCacheOptions::Mode;
  auto timed = [&start](const ProgramCacheOptions& c, bool* hit) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool from_cache = start(c);
    if (hit) *hit = from_cache;
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  StartTimes t;
  ProgramCacheOptions c = cache;
  const bool on = c.mode != Mode::Off;
  if (on) c.mode = Mode::Refresh;
  t.cold_ms = timed(c, nullptr);
  if (on) {
    c.mode = Mode::On;
    bool hit = false;
    const double ms = timed(c, &hit);
    if (hit) t.warm_ms = ms;
  }
  return t;
}

void register_backend(BackendEntry e) {
  for (const BackendEntry& o : entries()) {
    if (o.name == e.name || o.mnn_type == e.mnn_type)
      fail("internal: backend {} (MNN type {}) registered twice", e.name, e.mnn_type);
  }
  if (!e.make) fail("internal: backend {} registered without a factory", e.name);
  entries().push_back(std::move(e));
}

std::vector<const BackendEntry*> backends() {
  std::vector<const BackendEntry*> v;
  for (const BackendEntry& e : entries()) v.push_back(&e);
  std::sort(v.begin(), v.end(), [](const BackendEntry* a, const BackendEntry* b) {
    return a->host != b->host ? a->host : a->mnn_type < b->mnn_type;
  });
  return v;
}

const BackendEntry* find_backend(std::string_view name) {
  for (const BackendEntry& e : entries())
    if (e.name == name) return &e;
  return nullptr;
}

const BackendEntry* find_backend_mnn(int mnn_type) {
  for (const BackendEntry& e : entries())
    if (e.mnn_type == mnn_type) return &e;
  return nullptr;
}

const BackendEntry& host_backend() {
  for (const BackendEntry& e : entries())
    if (e.host) return e;
  fail("internal: no host backend is registered");
}

std::string device_backend_names() {
  std::string s;
  for (const BackendEntry* e : backends()) {
    if (!e->host) s += (s.empty() ? "" : ", ") + e->name;
  }
  return s.empty() ? "none" : s;
}

std::string mnn_backend_name(int mnn_type) {
  if (const BackendEntry* e = find_backend_mnn(mnn_type)) return e->name;
  for (const Absent& a : kAbsent)
    if (a.mnn_type == mnn_type) return a.name;
  return fmt::format("type {}", mnn_type);
}

int default_device(const std::vector<DeviceInfo>& devs) {
  for (size_t i = 0; i < devs.size(); ++i)
    if (!devs[i].emulated) return int(i);
  return 0;
}

const BackendEntry& require_backend(std::string_view name) {
  if (const BackendEntry* e = find_backend(name)) {
    const std::string why = e->unavailable ? e->unavailable() : std::string();
    if (why.empty()) return *e;
    fail("backend {} cannot run on this machine: {} (this build has {})", name, why, built_list());
  }
  if (const Absent* a = absent_by_name(name))
    fail("backend {} is not in this build: {} (this build has {})", name, a->why, built_list());
  fail("unknown backend '{}' (this build has {})", name, built_list());
}

const BackendEntry& require_backend_mnn(int mnn_type) {
  if (const BackendEntry* e = find_backend_mnn(mnn_type)) return require_backend(e->name);
  for (const Absent& a : kAbsent) {
    if (a.mnn_type == mnn_type)
      fail("backend {} ({}) is not in this build: {} (this build has {})", mnn_type, a.name, a.why,
           built_list());
  }
  fail(
      "unknown backend number {}: MNN numbers them 0 CPU, 1 Metal, 2 CUDA, 3 OpenCL, 7 Vulkan (this build "
      "has {})",
      mnn_type, built_list());
}

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendParams& p) {
  return require_backend(name).make(p);
}

std::shared_ptr<BackendOptions> make_backend_options(const BackendEntry& e,
                                                     const std::map<std::string, std::string>& given) {
  for (const auto& [flag, value] : given) {
    const bool known =
        std::any_of(e.options.begin(), e.options.end(), [&](const OptionSpec& o) { return o.flag == flag; });
    if (!known) {
      std::string flags;
      for (const OptionSpec& o : e.options) flags += (flags.empty() ? "" : ", ") + o.flag;
      fail("{} is not an option of the {} backend (it has {})", flag, e.name, flags.empty() ? "none" : flags);
    }
  }
  if (!e.make_options) return nullptr;
  std::shared_ptr<BackendOptions> o = e.make_options();
  for (const OptionSpec& spec : e.options) {
    const auto it = given.find(spec.flag);
    const std::string& value = it != given.end() ? it->second : spec.default_value;
    spec.set(*o, value);
    o->settings += spec.flag + " " + value + "\n";
  }
  return o;
}

}  // namespace tilellm
