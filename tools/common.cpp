#include "common.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "base/cpu_isa.h"
#include "base/cpu_set.h"
#include "base/error.h"
#include "commands.h"

namespace tilellm::cli {
namespace {

constexpr const char* kDefaultModel = "SmolLM2-135M-Instruct.Q4_1.gguf";

// The default model lives in models/ of the working directory or, for a build tree, of the source tree.
std::string default_model_path() {
  namespace fs = std::filesystem;
  const fs::path candidates[] = {fs::path("models") / kDefaultModel,
                                 fs::path(TILELLM_SOURCE_DIR) / "models" / kDefaultModel};
  for (const auto& p : candidates) {
    if (fs::exists(p)) return p.string();
  }
  fail(
      "no model given (-m) and the default model {} is not in ./models or {}/models; run "
      "scripts/fetch_models.sh",
      kDefaultModel, TILELLM_SOURCE_DIR);
}

}  // namespace

CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& v) -> std::string {
        try {
          size_t used = 0;
          const long long x = std::stoll(v, &used);
          if (used == v.size() && x >= lo) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("must be an integer of at least {}, got '{}'", lo, v);
      },
      fmt::format("INT>={}", lo));
}

void add_model_args(CLI::App* app, ModelArgs& a) {
  add_backend_args(app, a.backend);
  app->add_option("-m,--model", a.model,
                  "GGUF model file (default: models/" + std::string(kDefaultModel) + ")");
  app->add_option("-t,--threads", a.threads, "CPU threads (default: the CPUs this process may use)")
      ->check(at_least(1));
  app->add_option("-c,--ctx-size", a.ctx, "context size in tokens (default, or 0: model's, at most 4096)")
      ->check(at_least(0));
  app->add_option("-b,--batch-size", a.batch,
                  "prompt tokens per forward pass (default: the backend's, 512 on CUDA and Vulkan, else 64)")
      ->check(at_least(1));
  // llama.cpp's per-plane cache types: one type holds both planes here.
  app->add_option("--cache-type-k", a.kv_k,
                  "llama.cpp's -ctk: the KV cache type (f16, f32; as --cache-type)");
  app->add_option("--cache-type-v", a.kv_v, "llama.cpp's -ctv: the same, for V (must equal K's here)");
  app->add_option_function<std::string>(
         "--flash-attn",
         [&a](const std::string&) {
           a.notes.push_back(
               "-fa: attention is always computed block by block with an online softmax "
               "(flash-attention style) here; the option changes nothing");
         },
         "llama.cpp's -fa [on|off|auto]: accepted; attention is always block-wise here")
      ->expected(0, 1);
  app->add_flag_function(
      "--no-mmap,--mmap",
      [&a](int64_t) {
        a.notes.push_back(
            "--mmap / --no-mmap: the model file is always read through mmap here; the option "
            "changes nothing");
      },
      "llama.cpp's mmap switches: accepted; the file is always mapped here");
  app->add_option("-C,--cpu-mask", a.cpu_mask, "pin threads to these CPUs (hex mask, e.g. 0x3)");
  app->add_option("--cache-type", a.kv_type, "KV cache element type")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
  app->add_option(
         "--activations", a.activations,
         "matmul activations: q8 = quantized per weight type like llama.cpp (fast), f32 = exact float path")
      ->check(CLI::IsMember({"q8", "f32"}))
      ->capture_default_str();
  app->add_option("--weights", a.weights,
                  "how matrices are held: native = the GGUF types (Q4_0/Q4_1/Q8_0 repacked into tiles), "
                  "int4b64 / int8b0 / f16 = converted at load")
      ->check(CLI::IsMember({"native", "int4b64", "int8b0", "f16"}))
      ->capture_default_str();
}

void add_sampler_args(CLI::App* app, SamplingArgs& s) {
  SamplerParams& p = s.params;
  app->add_option("--temp", p.temperature, "temperature (0: greedy)")->capture_default_str();
  app->add_option("--top-k", p.top_k, "top-k (0: off)")->capture_default_str();
  app->add_option("--top-p", p.top_p, "top-p (1: off)")->capture_default_str();
  app->add_option("--min-p", p.min_p, "min-p (0: off)")->capture_default_str();
  app->add_option("--repeat-penalty", p.repeat_penalty, "repetition penalty (1: off)")->capture_default_str();
  app->add_option("--repeat-last-n", p.repeat_last_n, "tokens the penalty looks back")->capture_default_str();
  app->add_option_function<std::string>(
      "-s,--seed",
      [&s](const std::string& v) {
        if (v == "-1") {
          s.seed_given = false;
          return;
        }
        try {
          size_t used = 0;
          const unsigned long long x = std::stoull(v, &used);
          if (used == v.size() && v[0] != '-') {
            s.params.seed = x;
            s.seed_given = true;
            return;
          }
        } catch (const std::exception&) {
        }
        fail("-s: '{}' is not a seed (a non-negative integer, or -1 for a random one)", v);
      },
      "random seed (default, or -1: a random one, printed; a fixed seed repeats the text)");
}

SamplerParams pick_seed(const SamplingArgs& s) {
  SamplerParams p = s.params;
  if (!s.seed_given) {
    std::random_device rd;
    p.seed = (uint64_t(rd()) << 32 | rd()) & ((uint64_t(1) << 53) - 1);
    std::fprintf(stderr, "seed: %llu\n", (unsigned long long)p.seed);
  }
  return p;
}

ChatTemplate chat_template_for(const Model& model, const std::string& name) {
  const std::optional<std::string> jinja = model.file().get_string_opt("tokenizer.chat_template");
  const Tokenizer& tok = model.tokenizer();
  auto text = [&](int32_t id) { return id >= 0 ? std::string(tok.token_text(id)) : std::string(); };
  ChatTemplate t = chat_template_from_gguf(jinja, model.config().arch_name, text(tok.bos()), text(tok.eos()));
  const std::string builtin(chat_format_name(t.format));
  if (!name.empty()) {
    const std::optional<ChatFormat> f = chat_format_from_name(name);
    if (!f) fail("--chat-template {}: not a built-in format (chatml, gemma, llama2, llama3, phi3)", name);
    if (*f != t.format) t.default_system.clear();  // that text belongs to the model's own template
    t.format = *f;
    t.jinja.reset();
  } else if (!jinja || jinja->empty()) {
    std::fprintf(stderr,
                 "warning: the model has no chat template (tokenizer.chat_template); using the "
                 "built-in %s format (from its architecture, %s)\n",
                 builtin.c_str(), model.config().arch_name.c_str());
  } else if (!t.jinja) {
    std::fprintf(
        stderr,
        "warning: the model's chat template uses %s, which this engine's template interpreter does not "
        "implement; using the built-in %s format instead\n",
        t.unsupported.c_str(), builtin.c_str());
  }
  return t;
}

std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs) {
  std::string warning;
  std::string text = apply_chat_template(t, msgs, true, &warning);
  if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  return text;
}

std::unique_ptr<Model> load_model(const ModelArgs& a) {
  for (const std::string& n : a.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  LoadOptions lo;
  const bool tty = isatty(STDERR_FILENO);
  if (tty) {
    lo.progress = [](size_t done, size_t total) {
      const int pct = total ? int(100.0 * double(done) / double(total)) : 100;
      std::fprintf(stderr, "\rloading model: %3d%% [%-40s]", pct,
                   std::string(size_t(pct * 40 / 100), '#').c_str());
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  auto m = Model::load(path, lo);
  const ModelConfig& c = m->config();
  std::fprintf(stderr, "model: %s (%s, %lld layers, %.1fM params, %.1f MiB)\n", path.c_str(),
               c.arch_name.c_str(), (long long)c.n_layer, double(m->n_params()) / 1e6,
               double(m->weight_bytes()) / (1 << 20));
  if (a.ctx > m->config().n_ctx_train)
    std::fprintf(
        stderr,
        "warning: -c %lld is above the %lld tokens the model was trained on; past that its output may "
        "degrade\n",
        (long long)a.ctx, (long long)m->config().n_ctx_train);
  return m;
}

SessionOptions session_options(const ModelArgs& a) {
  std::string kv = a.kv_type;
  for (const std::string* t : {&a.kv_k, &a.kv_v}) {
    if (t->empty()) continue;
    if (*t != "f16" && *t != "f32")
      fail("KV cache type '{}' is not supported (f16, f32; -ctk and -ctv name one type for both)", *t);
    kv = *t;
  }
  if (!a.kv_k.empty() && !a.kv_v.empty() && a.kv_k != a.kv_v)
    fail("-ctk {} and -ctv {} differ: one cache type holds K and V here (f16 or f32)", a.kv_k, a.kv_v);
  SessionOptions o;
  o.n_threads = a.threads;
  if (!a.cpu_mask.empty()) o.cpus = parse_cpu_mask(a.cpu_mask);
  o.n_ctx = a.ctx;
  o.kv_type = kv == "f32" ? GgmlType::F32 : GgmlType::F16;
  o.activations = a.activations == "f32" ? ActivationMode::F32 : ActivationMode::Quantized;
  apply_backend_args(a.backend, o);
  o.n_batch = a.batch > 0 ? a.batch : default_prompt_batch(o.backend);
  o.weights = parse_weights_mode(a.weights);
  return o;
}

void select_isa(const std::string& name) {
  if (!select_cpu_isa(name))
    fail("--isa {}: not an instruction set this CPU runs (best, {})", name, supported_cpu_isa_names());
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string part = s.substr(i, j - i);
    try {
      size_t used = 0;
      const long v = std::stol(part, &used);
      if (used != part.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(part);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      fail("'{}' is not a token id (expected a comma-separated list of non-negative integers)", part);
    }
    i = j + 1;
  }
  if (ids.empty()) fail("no token ids given");
  return ids;
}

}  // namespace tilellm::cli
