#include "degrade_cost.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace tilellm::cli {
namespace {

// exp(mean over the scored positions of -log softmax(logits)[next token]).
double text_perplexity(Session& s, const std::vector<int32_t>& tokens, int64_t n_ctx, int64_t n_chunk,
                       int32_t bos, int64_t& scored) {
  const int64_t V = s.model().config().n_vocab;
  double nll = 0;
  scored = 0;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int64_t c = 0; c < n_chunk; ++c) {
    std::copy(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx, chunk.begin());
    if (bos >= 0) chunk[0] = bos;
    s.reset();
    s.eval(chunk.data(), n_ctx);
    for (int64_t j = n_ctx / 2; j < n_ctx - 1; ++j) {
      const float* l = s.logits_at(j);
      float mx = l[0];
      for (int64_t i = 1; i < V; ++i) mx = std::max(mx, l[i]);
      double sum = 0;
      for (int64_t i = 0; i < V; ++i) sum += std::exp(double(l[i] - mx));
      nll -= double(l[tokens[size_t(c * n_ctx + j + 1)]] - mx) - std::log(sum);
      ++scored;
    }
  }
  return std::exp(nll / double(scored));
}

}  // namespace

DegradeCost measure_degrade_cost(const Model& model, SessionOptions so, std::string file, int64_t n_ctx,
                                 int64_t chunks) {
  if (file.empty()) {
    const std::filesystem::path p =
        std::filesystem::path(TILELLM_SOURCE_DIR) / "tests/data/text/declaration_of_independence.txt";
    if (!std::filesystem::exists(p))
      fail("--degrade: its perplexity cost is measured on a text: give one with --ppl-file FILE");
    file = p.string();
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open the text file (--ppl-file)", file);
  std::stringstream ss;
  ss << in.rdbuf();
  const Tokenizer& tok = model.tokenizer();
  const std::vector<int32_t> tokens = tok.encode(ss.str(), true, false);
  if (n_ctx < 8) fail("--ppl-ctx {} is too small (at least 8)", n_ctx);
  const int64_t n_chunk = std::min<int64_t>(chunks, int64_t(tokens.size()) / n_ctx);
  if (n_chunk < 1)
    fail("{} tokenizes to {} tokens; measuring the --degrade cost needs at least {}", file, tokens.size(),
         n_ctx);
  so.n_ctx = n_ctx;
  so.logits_all = true;
  so.n_batch = std::min<int64_t>(std::max<int64_t>(so.n_batch, 1), n_ctx);
  Session s(model, so);
  if (!s.has_tile_mask())
    fail(
        "--degrade tile-mask: the {} backend has no tile mask for this model's matrices (it masks tiled "
        "feed-forward gate/up matrices)",
        s.backend_name());
  const int32_t bos = tok.add_bos() ? tok.bos() : -1;
  DegradeCost c;
  s.set_tile_mask(false);
  c.unmasked = text_perplexity(s, tokens, n_ctx, n_chunk, bos, c.scored);
  s.set_tile_mask(true);
  c.masked = text_perplexity(s, tokens, n_ctx, n_chunk, bos, c.scored);
  c.text = fmt::format("{}, {} chunks of {} tokens", std::filesystem::path(file).filename().string(), n_chunk,
                       n_ctx);
  return c;
}

}  // namespace tilellm::cli
