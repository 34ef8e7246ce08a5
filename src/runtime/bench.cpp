#include "runtime/bench.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "base/aligned.h"
#include "base/cpu_features.h"
#include "base/cpu_set.h"
#include "base/error.h"
#include "runtime/telemetry/pacer.h"

namespace tilellm::bench {
namespace {

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// Value kinds decide how a field is written in JSON (llama-bench quotes strings, not numbers).
enum class Kind { Str, Int, Float };

// One output cell: a field name, how JSON writes it, and its text (numbers as llama-bench prints them:
// integers plain, rates with "%f"). Order: llama-bench's field order for the fields that mean something on a
// CPU engine, then ours.
struct Cell {
  const char* name;
  Kind kind;
  std::string text;
};

// A start time's cell: empty when it was not measured (JSON: null).
std::string start_ms(double ms) {
  return ms < 0 ? std::string() : fmt::format("{:.1f}", ms);
}

// llama-bench's "backends": its name for the backend the row ran on (r.backend is "cpu" or
// "<name>:<device>+<memory>", e.g. "vulkan:0+buffer").
std::string llama_backends(const std::string& backend) {
  const std::string name = backend.substr(0, backend.find(':'));
  if (name == "cuda") return "CUDA";
  if (name == "vulkan") return "Vulkan";
  if (name == "opencl") return "OpenCL";
  if (name == "cpu") return "CPU";
  return name;
}

std::vector<Cell> cells(const Row& r) {
  const bool gpu = r.backend != "cpu";
  return {
      {"build_commit", Kind::Str, r.build_commit},
      {"build_number", Kind::Int, "0"},
      {"cpu_info", Kind::Str, r.cpu_info},
      {"gpu_info", Kind::Str, r.gpu_info},
      {"backends", Kind::Str, llama_backends(r.backend)},
      {"model_filename", Kind::Str, r.model_filename},
      {"model_type", Kind::Str, r.model_type},
      {"model_size", Kind::Int, std::to_string(r.model_size)},
      {"model_n_params", Kind::Int, std::to_string(r.model_n_params)},
      {"n_batch", Kind::Int, std::to_string(r.n_batch)},
      {"n_ubatch", Kind::Int, std::to_string(r.n_batch)},
      {"n_threads", Kind::Int, std::to_string(r.n_threads)},
      {"type_k", Kind::Str, r.type_k},
      {"type_v", Kind::Str, r.type_v},
      {"n_gpu_layers", Kind::Int,
       gpu ? "99" : "0"},  // a device backend holds every layer (llama-bench -ngl 99)
      {"n_prompt", Kind::Int, std::to_string(r.test.n_prompt)},
      {"n_gen", Kind::Int, std::to_string(r.test.n_gen)},
      {"n_depth", Kind::Int, std::to_string(r.test.n_depth)},
      {"test_time", Kind::Str, r.test_time},
      {"avg_ns", Kind::Int, std::to_string(r.avg_ns())},
      {"stddev_ns", Kind::Int, std::to_string(r.stddev_ns())},
      {"avg_ts", Kind::Float, std::to_string(r.avg_ts())},
      {"stddev_ts", Kind::Float, std::to_string(r.stddev_ts())},
      {"backend", Kind::Str, r.backend},
      {"cpu_set", Kind::Str, r.cpu_set},
      {"weights_mode", Kind::Str, r.weights_mode},
      {"activations", Kind::Str, r.activations},
      {"commit", Kind::Str, r.build_commit},
      {"weight_bytes_per_token", Kind::Int, std::to_string(r.weight_bytes_per_token)},
      {"start_cold_ms", Kind::Float, start_ms(r.start_cold_ms)},
      {"start_warm_ms", Kind::Float, start_ms(r.start_warm_ms)},
      {"pace", Kind::Str, r.pace},
      {"pace_target", Kind::Str, r.pace_target},
  };
}

nlohmann::ordered_json to_json(const Row& r) {
  nlohmann::ordered_json j;
  for (const Cell& c : cells(r)) {
    switch (c.kind) {
      case Kind::Str:
        j[c.name] = c.text;
        break;
      case Kind::Int:
        j[c.name] = std::stoll(c.text);
        break;
      case Kind::Float:
        if (c.text.empty()) {
          j[c.name] = nullptr;
        } else {
          j[c.name] = std::stod(c.text);
        }
        break;
    }
  }
  j["samples_ns"] = r.samples_ns;
  j["samples_ts"] = r.samples_ts();
  return j;
}

std::string csv_quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

class CsvPrinter final : public Printer {
 public:
  std::string header() override {
    std::string h;
    for (const auto& n : field_names()) {
      if (!h.empty()) h += ',';
      h += n;
    }
    return h + "\n";
  }
  std::string row(const Row& r) override {
    std::string line;
    for (const Cell& c : cells(r)) {
      if (!line.empty()) line += ',';
      line += csv_quote(c.text);
    }
    return line + "\n";
  }
};

class JsonPrinter final : public Printer {
 public:
  std::string header() override { return "[\n"; }
  std::string row(const Row& r) override {
    std::string s = first_ ? "" : ",\n";
    first_ = false;
    // Indented by two inside the array, like llama-bench's.
    std::string body = to_json(r).dump(2);
    std::string indented = "  ";
    for (char c : body) {
      indented += c;
      if (c == '\n') indented += "  ";
    }
    return s + indented;
  }
  std::string footer() override { return first_ ? "]\n" : "\n]\n"; }

 private:
  bool first_ = true;
};

class JsonlPrinter final : public Printer {
 public:
  std::string row(const Row& r) override { return to_json(r).dump() + "\n"; }
};

// Pads to |width| display columns (UTF-8 aware, for "±"): left-aligned when width < 0, else right-aligned.
std::string pad(const std::string& s, int width) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;  // count code points, not continuation bytes
  const size_t w = size_t(std::abs(width));
  if (cols >= w) return s;
  const std::string fill(w - cols, ' ');
  return width < 0 ? s + fill : fill + s;
}

// The backend column as llama-bench writes it ("CPU"), naming the OpenCL device ("OpenCL:0", with a profile
// "OpenCL:0:mali-valhall") and a --weights mode other than native ("CPU int8b0"), so rows of different runs
// can be told apart.
std::string backend_cell(const Row& r) {
  std::string b = r.backend == "cpu" ? "CPU" : r.backend;
  if (b.rfind("opencl", 0) == 0) b.replace(0, 6, "OpenCL");
  if (r.weights_mode != "native") b += " " + r.weights_mode;
  return b;
}

// llama-bench's table: | model | size | params | backend | threads | test | t/s |, right-aligned numbers.
class MdPrinter final : public Printer {
 public:
  std::string header() override {
    std::string h = "|";
    std::string rule = "|";
    for (const auto& c : columns()) {
      h += ' ';
      h += pad(c.title, c.width);
      h += " |";
      rule += ' ';
      rule.append(size_t(std::abs(c.width) - 1), '-');
      rule += c.width > 0 ? ": |" : "- |";
    }
    return h + "\n" + rule + "\n";
  }
  std::string row(const Row& r) override {
    commit_ = r.build_commit;
    if (r.pace != "off" || r.pace_target != "off")
      pace_ = fmt::format("\npaced: --pace {} --pace-target {} (the pauses are inside the timed runs)\n",
                          r.pace, r.pace_target);
    if (r.start_cold_ms >= 0) {
      start_ = fmt::format(
          "\n{} start: cold {:.1f} ms (programs built from source, self-check run), warm {}\n",
          backend_cell(r), r.start_cold_ms,
          r.start_warm_ms >= 0 ? fmt::format("{:.1f} ms (from the program cache)", r.start_warm_ms)
                               : std::string("not measured (program cache off)"));
    }
    const std::string size = r.model_size < (uint64_t(1) << 30)
                                 ? fmt::format("{:.2f} MiB", double(r.model_size) / (1 << 20))
                                 : fmt::format("{:.2f} GiB", double(r.model_size) / (1 << 30));
    const std::string params = r.model_n_params < 1000000000
                                   ? fmt::format("{:.2f} M", double(r.model_n_params) / 1e6)
                                   : fmt::format("{:.2f} B", double(r.model_n_params) / 1e9);
    const std::string cells[] = {r.model_type,
                                 size,
                                 params,
                                 backend_cell(r),
                                 std::to_string(r.n_threads),
                                 test_name(r.test),
                                 fmt::format("{:.2f} ± {:.2f}", r.avg_ts(), r.stddev_ts())};
    std::string line = "|";
    size_t i = 0;
    for (const auto& c : columns()) {
      line += ' ';
      line += pad(cells[i++], c.width);
      line += " |";
    }
    return line + "\n";
  }
  std::string footer() override {
    return start_ + pace_ + fmt::format("\nbuild: {}\n", commit_.empty() ? "unknown" : commit_);
  }

 private:
  struct Column {
    const char* title;
    int width;  // negative: left-aligned
  };
  static const std::vector<Column>& columns() {
    static const std::vector<Column> c = {{"model", -30}, {"size", 10}, {"params", 10}, {"backend", -12},
                                          {"threads", 7}, {"test", 15}, {"t/s", 20}};
    return c;
  }
  std::string commit_;
  std::string start_;  // the start-time line, when a row had one
  std::string pace_;   // the pacing line, when a row was paced
};

}  // namespace

std::string test_name(const TestSpec& t) {
  std::string s;
  if (t.n_prompt > 0 && t.n_gen == 0) {
    s = fmt::format("pp{}", t.n_prompt);
  } else if (t.n_gen > 0 && t.n_prompt == 0) {
    s = fmt::format("tg{}", t.n_gen);
  } else {
    s = fmt::format("pp{}+tg{}", t.n_prompt, t.n_gen);
  }
  if (t.n_depth > 0) s += fmt::format(" @ d{}", t.n_depth);
  return s;
}

std::vector<int64_t> parse_int_list(const std::string& s, const std::string& what) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string part = s.substr(i, j - i);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || v < 0) {
      fail("{}: '{}' is not a non-negative integer (expected a comma list such as 128,512)", what, part);
    }
    out.push_back(v);
    i = j + 1;
  }
  return out;
}

std::vector<TestSpec> make_tests(const std::vector<int64_t>& p, const std::vector<int64_t>& n,
                                 const std::vector<int64_t>& pg, const std::vector<int64_t>& d) {
  if (pg.size() % 2 != 0) fail("-pg takes pairs of prompt,gen token counts, got {} numbers", pg.size());
  std::vector<TestSpec> tests;
  const std::vector<int64_t> depths = d.empty() ? std::vector<int64_t>{0} : d;
  for (int64_t nd : depths) {
    for (int64_t np : p) {
      if (np > 0) tests.push_back({np, 0, nd});
    }
    for (int64_t ng : n) {
      if (ng > 0) tests.push_back({0, ng, nd});
    }
    for (size_t i = 0; i < pg.size(); i += 2) {
      if (pg[i] > 0 || pg[i + 1] > 0) tests.push_back({pg[i], pg[i + 1], nd});
    }
  }
  return tests;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double s = 0.0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double s = 0.0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

uint64_t Row::avg_ns() const {
  if (samples_ns.empty()) return 0;
  uint64_t s = 0;
  for (uint64_t x : samples_ns) s += x;
  return s / samples_ns.size();
}

uint64_t Row::stddev_ns() const {
  return uint64_t(stddev(std::vector<double>(samples_ns.begin(), samples_ns.end())));
}

std::vector<double> Row::samples_ts() const {
  std::vector<double> ts;
  const double n_tok = double(test.n_prompt + test.n_gen);
  for (uint64_t ns : samples_ns) ts.push_back(ns ? 1e9 * n_tok / double(ns) : 0.0);
  return ts;
}

double Row::avg_ts() const {
  return mean(samples_ts());
}
double Row::stddev_ts() const {
  return stddev(samples_ts());
}

Format parse_format(const std::string& s) {
  if (s == "md") return Format::Md;
  if (s == "csv") return Format::Csv;
  if (s == "json") return Format::Json;
  if (s == "jsonl") return Format::Jsonl;
  fail("unknown output format '{}' (expected md, csv, json or jsonl)", s);
}

std::unique_ptr<Printer> make_printer(Format f) {
  switch (f) {
    case Format::Md:
      return std::make_unique<MdPrinter>();
    case Format::Csv:
      return std::make_unique<CsvPrinter>();
    case Format::Json:
      return std::make_unique<JsonPrinter>();
    case Format::Jsonl:
      return std::make_unique<JsonlPrinter>();
  }
  fail("internal: unknown format");
}

const std::vector<std::string>& field_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Cell& c : cells(Row{})) n.emplace_back(c.name);
    return n;
  }();
  return names;
}

std::vector<uint64_t> measure(Session& s, const TestSpec& t, int reps, uint32_t seed,
                              telemetry::Pacer* pacer) {
  const Model& m = s.model();
  const int64_t V = m.config().n_vocab;
  const Tokenizer& tok = m.tokenizer();
  const bool bos = tok.add_bos() && tok.bos() >= 0;
  std::mt19937 rng(seed);
  auto random_ids = [&](int64_t n, bool first_bos) {
    std::vector<int32_t> ids(size_t(std::max<int64_t>(n, 0)));
    for (auto& id : ids) id = int32_t(rng() % uint32_t(V));
    if (first_bos && !ids.empty()) ids[0] = tok.bos();
    return ids;
  };
  // All token ids are drawn before timing; the timed region is only eval() calls.
  const std::vector<int32_t> depth = random_ids(t.n_depth, bos);
  const std::vector<int32_t> prompt = random_ids(t.n_prompt, bos && t.n_depth == 0);
  const std::vector<int32_t> gen = random_ids(t.n_gen, bos && t.n_depth == 0 && t.n_prompt == 0);

  s.reset();
  s.eval(depth.data(), int64_t(depth.size()));
  // Warm-up: the whole prompt and one decode step, like llama-bench.
  s.eval(prompt.data(), int64_t(prompt.size()));
  if (!gen.empty()) s.eval(gen.data(), 1);

  std::vector<uint64_t> samples;
  for (int r = 0; r < reps; ++r) {
    s.truncate(t.n_depth);
    const uint64_t t0 = now_ns();
    if (!pacer) {
      s.eval(prompt.data(), int64_t(prompt.size()));
      for (int32_t id : gen) s.eval(&id, 1);
    } else {
      // Paced: each pass is handed to the pacer, whose pauses fall inside the timed run.
      using Clock = telemetry::Pacer::Clock;
      Clock::time_point a = Clock::now();
      if (!prompt.empty()) {
        s.eval(prompt.data(), int64_t(prompt.size()));
        const Clock::time_point b = Clock::now();
        pacer->after_pass(a, b, int64_t(prompt.size()), false);
      }
      for (int32_t id : gen) {
        a = Clock::now();
        s.eval(&id, 1);
        pacer->after_pass(a, Clock::now(), 1, true);
      }
    }
    samples.push_back(now_ns() - t0);
  }
  return samples;
}

std::string cpu_model_name() {
  const std::string& m = cpu_features().model;
  return m.empty() ? "unknown" : m;
}

std::string cpu_affinity_list() {
  return affinity_list();
}

std::string utc_now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string file_type_name(int64_t ftype) {
  switch (ftype) {
    case 0:
      return "all F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 3:
      return "Q4_1";
    case 7:
      return "Q8_0";
    case 8:
      return "Q5_0";
    case 9:
      return "Q5_1";
    case 10:
      return "Q2_K - Medium";
    case 11:
      return "Q3_K - Small";
    case 12:
      return "Q3_K - Medium";
    case 13:
      return "Q3_K - Large";
    case 14:
      return "Q4_K - Small";
    case 15:
      return "Q4_K - Medium";
    case 16:
      return "Q5_K - Small";
    case 17:
      return "Q5_K - Medium";
    case 18:
      return "Q6_K";
    case 32:
      return "BF16";
    default:
      return "unknown";
  }
}

std::string model_type(const Model& m) {
  const double p = double(m.n_params());
  const std::string params = p >= 1e9 ? fmt::format("{:.1f}B", p / 1e9) : fmt::format("{:.0f}M", p / 1e6);
  return fmt::format("{} {} {}", m.config().arch_name, params,
                     file_type_name(m.file().get_int_or("general.file_type", -1)));
}

uint64_t weight_bytes_per_token(const Model& m, WeightsMode mode) {
  const ModelWeights& w = m.weights();
  // A matrix as the kernels read it: its GGUF rows (native: the tile repack keeps the same bytes), or the
  // converted codes plus their fp16 scales and offsets.
  auto bytes = [mode](const Weight& x) {
    const uint64_t n = uint64_t(x.n_in) * uint64_t(x.n_out);
    switch (mode) {
      case WeightsMode::Int4B64:
        return n / 2 + n / 64 * 4;
      case WeightsMode::Int8B0:
        return n + uint64_t(x.n_out) * 4;
      case WeightsMode::Int4B0:
        return n / 2 + uint64_t(x.n_out) * 4;
      case WeightsMode::F16:
        return n * 2;
      case WeightsMode::F32:
        return n * 4;
      case WeightsMode::Native:
        break;
    }
    return uint64_t(x.row_bytes) * uint64_t(x.n_out);
  };
  uint64_t total = bytes(w.output) + w.tok_embd.row_bytes;
  const uint64_t n_used = uint64_t(m.config().n_expert_used);
  for (const LayerWeights& l : w.layers) {
    total += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) + bytes(l.w_up) +
             bytes(l.w_down);
    // With experts: the router, the n_expert_used experts a token runs, and the shared expert with its gate.
    if (!l.gate_exps.empty()) {
      total += bytes(l.router) +
               n_used * (bytes(l.gate_exps[0]) + bytes(l.up_exps[0]) + bytes(l.down_exps[0])) +
               bytes(l.gate_shexp) + bytes(l.up_shexp) + bytes(l.down_shexp) + bytes(l.router_shexp);
    }
  }
  return total;
}

MemBandwidth measure_membw(size_t buffer_bytes, int n_threads, int reps) {
  ThreadPool pool(std::max(n_threads, 1));
  BackendParams p;
  p.pool = &pool;
  const std::unique_ptr<MemoryProbe> probe = host_backend().make_probe(p);
  MemBandwidth bw;
  bw.buffer_bytes = buffer_bytes / 64 * 64;
  bw.n_threads = pool.size();
  for (int r = 0; r < std::max(reps, 1); ++r) {
    bw.copy_gbs = std::max(bw.copy_gbs, probe->copy_gbs(bw.buffer_bytes));
    bw.read_gbs = std::max(bw.read_gbs, probe->read_gbs(bw.buffer_bytes));
  }
  return bw;
}

}  // namespace tilellm::bench
