// `tilellm bench --backend opencl`: the backend's cold and warm start times (bench.h, measure_opencl_start).
#include <chrono>

#include "format/error.h"
#include "runtime/bench.h"
#ifdef TILELLM_HAVE_OPENCL
#include "backends/opencl/opencl_backend.h"
#endif

namespace tilellm::bench {

StartTimes measure_opencl_start(const SessionOptions& o) {
#ifdef TILELLM_HAVE_OPENCL
  using Mode = opencl::ProgramCacheOptions::Mode;
  // The backend as a session makes it, but sized only for the self-check and with no KV cache or resident
  // arrays: what is timed is opening the device, making the programs and the self-check (or its cached
  // verdict), not allocations that scale with the model.
  OpenclBackendOptions g;
  g.device = o.device;
  g.profile = o.device_profile;
  g.kv_type = o.kv_type;
  g.max_tokens = 4;
  g.max_in_elems = g.max_out_elems = 4096;
  g.max_width = 64;
  g.cache = o.program_cache;
  auto start_ms = [&g](bool* from_cache) {
    const auto t0 = std::chrono::steady_clock::now();
    OpenclBackend be(g);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (from_cache) *from_cache = be.programs_from_cache() && be.verdict_from_cache();
    return ms;
  };
  StartTimes t;
  const bool cache_on = o.program_cache.mode != Mode::Off;
  // Cold: the cache is bypassed but written, so the warm start below finds the entry.
  if (cache_on) g.cache.mode = Mode::Refresh;
  t.cold_ms = start_ms(nullptr);
  if (cache_on) {
    g.cache.mode = Mode::On;
    bool from_cache = false;
    const double ms = start_ms(&from_cache);
    if (from_cache) t.warm_ms = ms;
  }
  return t;
#else
  (void)o;
  fail("this build has no OpenCL backend (CMake found no OpenCL headers and ICD loader when configuring it)");
#endif
}

}  // namespace tilellm::bench
