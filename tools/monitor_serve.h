// `tilellm monitor --serve URL`: a running `tilellm serve` sampled through its metrics instead of a workload
// run here. Its decode thread's steps come from GET /metrics/steps (tools/serve/step_log.h), polled a few
// times a second; this machine's sensors (the server's, when it runs here) from the telemetry sampled as
// for any monitored run. Each step becomes a forward-pass record: a step in which slots generated is a
// decode pass of that many tokens (its wall time is the gap each of those clients saw between two tokens),
// a step of prompt chunks alone a prompt pass.
#pragma once

#include <string>

#include "runtime/telemetry/record.h"
#include "runtime/telemetry/telemetry.h"

namespace tilellm::cli {

struct ServeSampling {
  std::string url;      // http://host:port (a path after it is ignored)
  std::string api_key;  // the server's --api-key, when it has one
  double duration = 60;
  double poll_hz = 4;
};

// Samples for `duration` seconds (tel started and stopped here) and returns the record: the passes, the
// samples, the sources, and RunInfo's model, backend and workload from the server. Throws tilellm::Error
// naming the URL when the server cannot be reached, refuses the key, or answers something else.
telemetry::MonitorRecord sample_serve(const ServeSampling& s, telemetry::Telemetry& tel);

}  // namespace tilellm::cli
