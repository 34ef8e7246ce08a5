// `tilellm bench`: the chosen backend's cold and warm start times (bench.h, measure_start), through its
// registry entry.
#include "base/error.h"
#include "runtime/bench.h"

namespace tilellm::bench {

StartTimes measure_start(const SessionOptions& o) {
  const BackendEntry& e = require_backend(o.backend);
  if (!e.measure_start) return {};
  BackendParams p;
  p.device = o.device;
  p.device_profile = o.device_profile;
  p.weights = o.weights;
  p.gpu_memory = o.gpu_memory;
  p.kv_type = o.kv_type;
  p.options = o.backend_options.get();
  return e.measure_start(p);
}

}  // namespace tilellm::bench
