// `tilellm perplexity`: llama-perplexity's method, so the numbers compare directly. The text is tokenized
// once (with BOS when the model wants it) and cut into chunks of n_ctx tokens; each chunk starts from an
// empty cache (its first token replaced by BOS when the model uses one), and only the second half of each
// chunk is scored, so every scored token has at least n_ctx/2 tokens of context:
//   nll = -log softmax(logits[j])[token[j+1]]  for j in [n_ctx/2, n_ctx-1)
//   PPL = exp(mean nll),  error = PPL * sqrt((mean nll^2 - mean(nll)^2) / (count - 1))
// --kl-divergence-base FILE writes the scored positions' log-probabilities in llama-perplexity's layout
// (kl_divergence.h); with --kl-divergence the run reads FILE instead of a text (its tokens, its n_ctx) and
// prints the KL-divergence of this run's distributions from the file's, as llama-perplexity does.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "commands.h"
#include "common.h"
#include "kl_divergence.h"
#include "runtime/telemetry/pacing.h"

namespace tilellm::cli {
namespace {

struct PplArgs {
  ModelArgs model;
  std::string file;
  int64_t chunks = -1;
  std::string kld_base;  // --kl-divergence-base FILE
  bool kld = false;      // --kl-divergence: score against kld_base
  std::string degrade;   // --degrade tile-mask=F: score with the lossy mask on (its cost)
};

// log softmax(logits)[target], in double.
double log_prob(const float* logits, int64_t n, int32_t target) {
  float mx = logits[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i] - mx));
  return double(logits[target] - mx) - std::log(sum);
}

void perplexity(PplArgs a) {
  if (a.kld && a.kld_base.empty())
    fail("--kl-divergence scores against a base file: give it with --kl-divergence-base FILE");
  std::unique_ptr<KldBase> base;
  std::vector<int32_t> tokens;
  std::string text;
  if (a.kld) {
    base = std::make_unique<KldBase>(a.kld_base);
    if (a.model.ctx != 0 && a.model.ctx != base->n_ctx())
      fail("{} was computed with a context of {}, not the -c {} given (leave -c out)", a.kld_base,
           base->n_ctx(), a.model.ctx);
    a.model.ctx = base->n_ctx();
  } else {
    if (a.file.empty()) fail("perplexity needs a text file (-f FILE)");
    std::ifstream in(a.file, std::ios::binary);
    if (!in) fail("{}: cannot open the text file", a.file);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    if (a.model.ctx == 0) a.model.ctx = 512;
  }
  auto model = load_model(a.model);
  const Tokenizer& tok = model->tokenizer();
  const int64_t n_ctx = a.model.ctx, V = model->config().n_vocab;
  int64_t n_chunk = 0;
  if (base) {
    if (base->n_vocab() != V)
      fail("{} holds a vocabulary of {} tokens, the model {} (another model's base file?)", a.kld_base,
           base->n_vocab(), V);
    tokens = base->tokens();
    for (int32_t t : tokens) {
      if (t < 0 || t >= V) fail("{}: token {} is outside the vocabulary of {}", a.kld_base, t, V);
    }
    n_chunk = base->n_chunk();
  } else {
    tokens = tok.encode(text, true, false);
    if (int64_t(tokens.size()) < 2 * n_ctx) {
      fail("{} tokenizes to {} tokens; perplexity with a context of {} needs at least {}", a.file,
           tokens.size(), n_ctx, 2 * n_ctx);
    }
    n_chunk = int64_t(tokens.size()) / n_ctx;
  }
  if (a.chunks > 0) n_chunk = std::min(n_chunk, a.chunks);

  SessionOptions so = session_options(a.model);
  so.logits_all = true;
  so.n_batch = std::min<int64_t>(std::max<int64_t>(so.n_batch, 1), n_ctx);
  if (!a.degrade.empty()) so.tile_mask = telemetry::parse_degrade(a.degrade).tile_mask;
  Session session(*model, so);
  if (so.tile_mask > 0) {
    if (!session.has_tile_mask())
      fail(
          "--degrade tile-mask: the {} backend has no tile mask for this model's matrices (it masks tiled "
          "feed-forward gate/up matrices)",
          session.backend_name());
    session.set_tile_mask(true);
    std::fprintf(stderr, "perplexity: --degrade %s: the lossy tile mask is on for every token\n",
                 a.degrade.c_str());
  }
  const int64_t first = n_ctx / 2, scored = n_ctx - first - 1, rec = kld_record_size(V);
  std::fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld, scoring the last %lld of each\n",
               tokens.size(), (long long)n_chunk, (long long)n_ctx, (long long)scored);
  std::unique_ptr<KldBaseWriter> writer;
  if (!a.kld_base.empty() && !a.kld) {
    tokens.resize(size_t(n_chunk * n_ctx));  // the file holds the evaluated chunks' tokens
    writer = std::make_unique<KldBaseWriter>(a.kld_base, n_ctx, V, n_chunk, tokens);
  }
  std::vector<uint16_t> recs(size_t(scored * rec));
  KldStats stats;

  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  double nll = 0.0, nll2 = 0.0;
  int64_t count = 0;
  for (int64_t c = 0; c < n_chunk; ++c) {
    std::copy(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx, chunk.begin());
    if (tok.add_bos() && tok.bos() >= 0) chunk[0] = tok.bos();
    session.reset();
    session.eval(chunk.data(), n_ctx);
    if (base) base->read_chunk(recs);
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const int32_t next = tokens[size_t(c * n_ctx + j + 1)];
      const double v = -log_prob(session.logits_at(j), V, next);
      nll += v;
      nll2 += v * v;
      ++count;
      uint16_t* r = recs.data() + size_t((j - first) * rec);
      if (writer) kld_encode(session.logits_at(j), V, next, r);
      if (base) stats.add(session.logits_at(j), V, r, next);
    }
    if (writer) writer->write(recs);
    std::printf("[%lld]%.4f,", (long long)(c + 1), std::exp(nll / double(count)));
    std::fflush(stdout);
  }
  std::printf("\n");
  if (writer) writer->close();
  const double mean = nll / double(count);
  const double ppl = std::exp(mean);
  double var = nll2 / double(count) - mean * mean;
  const double err = var > 0 && count > 1 ? std::sqrt(var / double(count - 1)) * ppl : 0.0;
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
  if (base) stats.print(stdout);
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto a = std::make_shared<PplArgs>();
  CLI::App* sub =
      app.add_subcommand("perplexity", "perplexity of a text file, computed like llama-perplexity");
  add_model_args(sub, a->model);
  sub->add_option("-f,--file", a->file, "text file (not with --kl-divergence: the base file has the tokens)");
  sub->add_option("--chunks", a->chunks, "most chunks to evaluate (-1: all)");
  sub->add_option("--kl-divergence-base", a->kld_base,
                  "file of the scored positions' log-probabilities, in llama-perplexity's layout: written "
                  "by this run, or with --kl-divergence read as the base to compare against");
  sub->add_flag("--kl-divergence", a->kld,
                "KL-divergence of this run's token distributions from the base file's (its tokens and "
                "context; a file llama-perplexity wrote is read too)");

  sub->add_option(
      "--degrade", a->degrade,
      "score with monitor's lossy degradation on: tile-mask=F (the F weakest feed-forward row tiles "
      "masked), to see its cost");
  sub->callback([a] { perplexity(*a); });
}

}  // namespace tilellm::cli
