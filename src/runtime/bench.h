// Benchmark measurement and reporting in llama-bench's vocabulary, so that rows from `tilellm bench` and
// `llama-bench` line up field by field and can be compared in one run (bench/compare_llama.sh).
//
// A test is llama-bench's: n_depth tokens already in the cache (evaluated once, untimed), then n_prompt
// prompt tokens evaluated as one batch run ("pp"), then n_gen single-token decode steps ("tg"); everything
// after the depth is timed together. Tokens are random valid ids from a fixed seed (the first prompt token is
// BOS when the model adds one), so the numbers do not depend on a text. One warm-up run precedes the timed
// repetitions.
//
// Rows are printed as a Markdown table (llama-bench's columns), CSV, JSON (one array) or JSONL (one object
// per line). Field names are llama-bench's (`model_filename`, `n_prompt`, `avg_ts`, `samples_ns`, ...)
// followed by ours (`backend`, `cpu_set`, `weights_mode`, `activations`, `commit`, `weight_bytes_per_token`,
// `start_cold_ms`, `start_warm_ms`, `pace`, `pace_target`). The start times (measure_start) are the run's,
// repeated in every row; the Markdown table, whose columns are llama-bench's, gives them in a line below it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace tilellm::telemetry {
class Pacer;
}

namespace tilellm::bench {

struct TestSpec {
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  int64_t n_depth = 0;
  bool operator==(const TestSpec&) const = default;
};

// llama-bench's test label: "pp512", "tg128", "pp512+tg128", with " @ d1024" when there is a depth.
std::string test_name(const TestSpec& t);

// Parses a comma list of non-negative integers ("128,512"); throws tilellm::Error naming `what` otherwise.
std::vector<int64_t> parse_int_list(const std::string& s, const std::string& what);

// The tests llama-bench runs for -p, -n, -pg and -d: every pp N and every tg N (zeros skipped), then every
// pp+tg pair, each at every depth, in that order. pg is a flat list of (prompt, gen) pairs.
std::vector<TestSpec> make_tests(const std::vector<int64_t>& p, const std::vector<int64_t>& n,
                                 const std::vector<int64_t>& pg, const std::vector<int64_t>& d);

// One result row.
struct Row {
  // llama-bench's fields.
  std::string build_commit;
  std::string cpu_info;
  std::string gpu_info;  // a device backend's device, as `tilellm devices` names it; empty for the CPU
  std::string model_filename;
  std::string model_type;   // "<arch> <params> <file type>", e.g. "llama 135M Q4_0"
  uint64_t model_size = 0;  // bytes of all tensors
  int64_t model_n_params = 0;
  int64_t n_batch = 0;  // tokens per forward pass (llama.cpp's n_ubatch)
  int n_threads = 0;
  std::string type_k = "f16";
  std::string type_v = "f16";
  TestSpec test;
  std::string test_time;  // RFC 3339 UTC, when the test started
  std::vector<uint64_t> samples_ns;
  // Ours.
  std::string backend = "cpu";
  std::string cpu_set;                  // the effective CPU affinity list, e.g. "0-1"
  std::string weights_mode = "native";  // --weights: native (GGUF types, some tiled), int4b64, int8b0, f16
  std::string activations = "q8";
  uint64_t weight_bytes_per_token = 0;  // weight bytes one decode step reads (for the bandwidth roofline)
  // Start-up of the backend in milliseconds (measure_start); negative: not measured (the CPU backend, or
  // warm with the program cache off): CSV writes an empty cell, JSON null.
  double start_cold_ms = -1;
  double start_warm_ms = -1;
  // Pacing of the timed runs (bench --pace, --pace-target; telemetry/pacing.h to_string), "off" when none.
  std::string pace = "off";
  std::string pace_target = "off";

  // llama-bench's statistics: integer mean and sample standard deviation of the times, and of the rates
  // (n_prompt + n_gen) / time per sample.
  uint64_t avg_ns() const;
  uint64_t stddev_ns() const;
  std::vector<double> samples_ts() const;
  double avg_ts() const;
  double stddev_ts() const;
};

// Mean and sample standard deviation (n - 1), 0 for fewer than two values, as llama-bench computes them.
double mean(const std::vector<double>& v);
double stddev(const std::vector<double>& v);

enum class Format { Md, Csv, Json, Jsonl };
Format parse_format(const std::string& s);  // "md", "csv", "json", "jsonl"; throws tilellm::Error otherwise

// Streams rows in one format: header() once, row() per result as it completes, footer() once.
class Printer {
 public:
  virtual ~Printer() = default;
  virtual std::string header() { return {}; }
  virtual std::string row(const Row& r) = 0;
  virtual std::string footer() { return {}; }
};
std::unique_ptr<Printer> make_printer(Format f);

// The names of the fields of a CSV/JSON row, in output order (samples_ns and samples_ts come last in JSON).
const std::vector<std::string>& field_names();

// Runs one test on a session whose context holds at least n_depth + n_prompt + n_gen tokens: a warm-up run,
// then `reps` timed runs. Returns the time of each run in nanoseconds. With a pacer (bench --pace,
// --pace-target) every timed pass is handed to it, and its pauses count in the time.
std::vector<uint64_t> measure(Session& s, const TestSpec& t, int reps, uint32_t seed,
                              telemetry::Pacer* pacer = nullptr);

// The chosen backend's start-up (its registry entry's measure_start: cold, from nothing; warm, from what the
// cold start cached) for the device, profile, KV cache type and options of `o`, in milliseconds. The backend
// is made without a model: uploading the weights costs the same either way and is left out. Both negative
// for a backend that does not measure its start (the host backend), warm negative when nothing was cached.
StartTimes measure_start(const SessionOptions& o);

// Facts about the machine and the build that every row carries.
std::string cpu_model_name();     // /proc/cpuinfo's "model name", or "unknown"
std::string cpu_affinity_list();  // sched_getaffinity as a list of ranges, "0-3,6"
std::string utc_now_rfc3339();
// general.file_type as llama.cpp names it ("Q4_0", "Q4_K - Medium", ...).
std::string file_type_name(int64_t ftype);
// "<arch> <params> <file type>", e.g. "llama 135M Q4_0".
std::string model_type(const Model& m);
// Bytes of weights one decode step reads: every layer matrix and the output matrix (as held in `mode`), plus
// one embedding row.
uint64_t weight_bytes_per_token(const Model& m, WeightsMode mode = WeightsMode::Native);

// Memory bandwidth, for the decode roofline: the host backend's memory probes (backends/registry.h) on a
// buffer of buffer_bytes over n_threads threads: a memcpy (bytes read + bytes written per second) and a pure
// read, best of `reps` each.
struct MemBandwidth {
  size_t buffer_bytes = 0;
  int n_threads = 0;
  double copy_gbs = 0;  // (read + write) GB/s, 1 GB = 1e9 bytes
  double read_gbs = 0;
};
MemBandwidth measure_membw(size_t buffer_bytes, int n_threads, int reps);

}  // namespace tilellm::bench
