// `tilellm bench`: the chosen backend's cold and warm start times (bench.h, measure_start), through its
// registry entry.
#include "base/error.h"
#include "runtime/bench.h"

namespace tilellm::bench {

StartTimes measure_start(const SessionOptions& o) {
  const BackendEntry& e = require_backend(o.backend);
  if (!e.measure_start) return {};
  return e.measure_start(backend_params(o));
}

}  // namespace tilellm::bench
