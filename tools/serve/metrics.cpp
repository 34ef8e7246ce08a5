#include "metrics.h"

#include <fmt/format.h>

namespace tilellm::serve {
namespace {

void put(std::string& out, const char* name, const char* type, const char* help, double v) {
  out +=
      fmt::format("# HELP tilellm_{0} {1}\n# TYPE tilellm_{0} {2}\ntilellm_{0} {3}\n", name, help, type, v);
}

}  // namespace

std::string Metrics::prometheus(const PoolGauges& g) const {
  std::string o;
  const double p_s = double(prompt_us.load()) / 1e6, g_s = double(gen_us.load()) / 1e6;
  put(o, "requests_total", "counter", "HTTP requests answered", double(requests.load()));
  put(o, "requests_errors_total", "counter", "requests answered with a 4xx or 5xx status",
      double(requests_errors.load()));
  put(o, "requests_rejected_total", "counter", "requests answered 503 because the queue was full",
      double(requests_rejected.load()));
  put(o, "requests_cancelled_total", "counter", "generations stopped because the client went away",
      double(requests_cancelled.load()));
  put(o, "completions_total", "counter", "chat and text completions finished", double(completions.load()));
  put(o, "embeddings_total", "counter", "embedding inputs finished", double(embeddings.load()));
  put(o, "prompt_tokens_total", "counter", "prompt tokens of finished requests",
      double(prompt_tokens.load()));
  put(o, "prompt_tokens_reused_total", "counter",
      "prompt tokens found in a slot's cache, not evaluated again", double(prompt_tokens_reused.load()));
  put(o, "tokens_predicted_total", "counter", "generated tokens", double(generated_tokens.load()));
  put(o, "prompt_seconds_total", "counter", "time spent evaluating prompts", p_s);
  put(o, "tokens_predicted_seconds_total", "counter", "time spent generating, summed over requests", g_s);
  const double evaluated = double(prompt_tokens.load() - prompt_tokens_reused.load());
  put(o, "prompt_tokens_seconds", "gauge", "average prompt throughput (evaluated tokens per second)",
      p_s > 0 ? evaluated / p_s : 0.0);
  put(o, "predicted_tokens_seconds", "gauge", "average generation speed of one request (tokens per second)",
      g_s > 0 ? double(generated_tokens.load()) / g_s : 0.0);
  put(o, "slots_total", "gauge", "parallel slots", g.slots_total);
  put(o, "slots_busy", "gauge", "slots working on a request", g.slots_busy);
  put(o, "queue_depth", "gauge", "requests waiting for a slot", g.queue_depth);
  put(o, "queue_capacity", "gauge", "requests that may wait before 503", g.queue_capacity);
  put(o, "kv_cells_used", "gauge", "tokens held in the slots' KV caches", double(g.kv_cells_used));
  put(o, "kv_cells_total", "gauge", "KV cache cells of all slots", double(g.kv_cells_total));
  return o;
}

}  // namespace tilellm::serve
