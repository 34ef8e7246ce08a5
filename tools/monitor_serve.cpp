#include "monitor_serve.h"

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/error.h"

namespace tilellm::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// scheme://host:port, without a path (httplib's client takes that form).
std::string base_of(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos || url.compare(0, scheme, "http") != 0)
    fail("--serve {}: give the server's address as http://HOST:PORT", url);
  const size_t path = url.find('/', scheme + 3);
  const std::string base = path == std::string::npos ? url : url.substr(0, path);
  if (base.size() == scheme + 3) fail("--serve {}: no host in the address", url);
  return base;
}

class ServeClient {
 public:
  ServeClient(const std::string& url, const std::string& key) : url_(url), cli_(base_of(url)) {
    cli_.set_connection_timeout(5, 0);
    cli_.set_read_timeout(10, 0);
    if (!key.empty()) cli_.set_bearer_token_auth(key);
  }
  json get(const std::string& path) {
    httplib::Result r = cli_.Get(path);
    if (!r)
      fail("--serve {}: GET {} failed: {} (is `tilellm serve` running there?)", url_, path,
           httplib::to_string(r.error()));
    if (r->status == 401)
      fail("--serve {}: GET {} was refused (401): give the server's key with --api-key", url_, path);
    if (r->status != 200)
      fail("--serve {}: GET {} answered {}: {}", url_, path, r->status, r->body.substr(0, 200));
    try {
      return json::parse(r->body);
    } catch (const json::exception& e) {
      fail("--serve {}: GET {} did not answer JSON ({})", url_, path, e.what());
    }
  }

 private:
  std::string url_;
  httplib::Client cli_;
};

}  // namespace

telemetry::MonitorRecord sample_serve(const ServeSampling& s, telemetry::Telemetry& tel) {
  if (!(s.poll_hz > 0 && s.poll_hz <= 100)) fail("internal: poll rate {} Hz", s.poll_hz);
  ServeClient cli(s.url, s.api_key);
  telemetry::MonitorRecord r;
  try {
    const json m = cli.get("/v1/models").at("data").at(0);
    const json& meta = m.at("meta");
    r.info.model = m.at("id").get<std::string>();
    r.info.model_type = fmt::format("{} {:.0f}M", meta.at("arch").get<std::string>(),
                                    meta.at("n_params").get<double>() / 1e6);
  } catch (const json::exception& e) {
    fail("--serve {}: GET /v1/models is not a TileLLM server's answer ({})", s.url, e.what());
  }
  r.info.backend = "serve at " + base_of(s.url);
  r.info.workload = fmt::format(
      "the server's own requests, sampled through GET /metrics/steps at {:g} Hz (a decode pass: one engine "
      "step with generating slots, its tokens one a slot; a prompt pass: a step of prompt chunks alone)",
      s.poll_hz);
  // Only steps that start from now on: the first read tells where the log stands.
  uint64_t after =
      cli.get("/metrics/steps?after=" + std::to_string(UINT64_MAX >> 1)).at("next_after").get<uint64_t>();
  tel.start();
  const Clock::time_point start = Clock::now();
  const auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / s.poll_hz));
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.duration));
  const bool tty = isatty(STDERR_FILENO);
  uint64_t steps = 0, tokens = 0;
  const double t_start = tel.now();
  for (Clock::time_point next = start;;) {
    const bool last = Clock::now() >= deadline;
    json j;
    try {
      j = cli.get("/metrics/steps?after=" + std::to_string(after));
    } catch (const Error&) {
      tel.stop();
      throw;
    }
    const double now_local = tel.now();
    try {
      // The server's clock mapped onto this one at the moment of the answer (the request's own latency,
      // well under a step, is the error).
      const double offset = now_local - j.at("now_s").get<double>();
      r.info.dropped += j.at("missed").get<uint64_t>();
      for (const json& row : j.at("steps")) {
        const double t = row.at(1).get<double>() + offset;
        if (t < t_start) continue;
        telemetry::TokenRecord p;
        p.t = t;
        p.compute_ms = row.at(2).get<float>();
        const int32_t n_tok = row.at(3).get<int32_t>(), n_gen = row.at(4).get<int32_t>();
        p.decode = n_gen > 0 ? 1 : 0;
        p.n_tok = n_gen > 0 ? n_gen : n_tok;
        tel.record_pass(p);
        steps += 1;
        tokens += uint64_t(n_gen);
      }
      after = j.at("next_after").get<uint64_t>();
    } catch (const json::exception& e) {
      tel.stop();
      fail("--serve {}: GET /metrics/steps is not a TileLLM server's answer ({})", s.url, e.what());
    }
    if (last) break;
    if (tty) {
      const double el = std::chrono::duration<double>(Clock::now() - start).count();
      std::fprintf(stderr, "\rmonitor: %.0f / %.0f s, %llu steps, %llu tokens generated   ", el, s.duration,
                   (unsigned long long)steps, (unsigned long long)tokens);
    }
    next += period;
    std::this_thread::sleep_until(std::min(next, deadline));
  }
  if (tty) std::fprintf(stderr, "\n");
  tel.stop();
  r.info.duration_s = s.duration;
  r.info.sample_hz = tel.options().sample_hz;
  r.info.dropped += tel.dropped();
  r.info.late_samples = tel.late_samples();
  r.sources = tel.sources();
  r.samples = tel.samples();
  r.passes = tel.passes();
  return r;
}

}  // namespace tilellm::cli
