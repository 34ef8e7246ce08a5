// KL-divergence against a base file in llama-perplexity's layout (kl_divergence.h).
#include "kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace tilellm::cli {
namespace {

// (mean, uncertainty of the mean) of a sample given its sum and sum of squares.
std::pair<double, double> mean_unc(double sum, double sum2, int64_t n) {
  const double m = sum / double(n), var = sum2 / double(n) - m * m;
  return {m, n > 1 && var > 0 ? std::sqrt(var / double(n - 1)) : 0.0};
}

// The value at `fraction` of the sorted values, interpolated between neighbours.
float percentile(const std::vector<float>& v, float fraction) {
  if (fraction <= 0) return v.front();
  if (fraction >= 1) return v.back();
  float p = fraction * float(v.size() - 1);
  const size_t i = size_t(p);
  p -= float(i);
  return (1 - p) * v[i] + p * v[std::min(i + 1, v.size() - 1)];
}

float median(const std::vector<float>& v) {
  return v.size() % 2 == 0 ? 0.5f * (v[v.size() / 2] + v[v.size() / 2 - 1]) : v[v.size() / 2];
}

}  // namespace

double kld_encode(const float* logits, int64_t n_vocab, int32_t target, uint16_t* rec) {
  float mx = logits[0], mn = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]), mn = std::min(mn, logits[i]);
  mn = std::max(mn, mx - 16);
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(logits[i] - mx);
  const float log_sum = float(std::log(sum));
  const float min_log_prob = mn - mx - log_sum, scale = (mx - mn) / 65535.0f;
  std::memcpy(rec, &scale, 4);
  std::memcpy(rec + 2, &min_log_prob, 4);
  uint16_t* codes = rec + 4;
  std::fill(codes, codes + (kld_record_size(n_vocab) - 4), uint16_t(0));
  if (scale > 0) {
    const float inv = 1 / scale;
    for (int64_t i = 0; i < n_vocab; ++i)
      codes[i] = logits[i] > mn ? uint16_t(std::lrint(inv * (logits[i] - mn))) : 0;
  }
  return double(mx) + double(log_sum) - double(logits[target]);
}

KldBaseWriter::KldBaseWriter(const std::string& path, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                             const std::vector<int32_t>& tokens)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) fail("{}: cannot write the KL-divergence base file", path);
  const uint32_t ctx = uint32_t(n_ctx);
  const int32_t vocab = int32_t(n_vocab), chunks = int32_t(n_chunk);
  out_.write("_logits_", 8);
  out_.write(reinterpret_cast<const char*>(&ctx), 4);
  out_.write(reinterpret_cast<const char*>(&vocab), 4);
  out_.write(reinterpret_cast<const char*>(&chunks), 4);
  out_.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(size_t(n_chunk * n_ctx) * 4));
}

void KldBaseWriter::write(const std::vector<uint16_t>& records) {
  out_.write(reinterpret_cast<const char*>(records.data()), std::streamsize(records.size() * 2));
}

void KldBaseWriter::close() {
  out_.close();
  if (out_.fail()) fail("{}: writing the KL-divergence base file failed (disk full?)", path_);
}

KldBase::KldBase(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) fail("{}: cannot open the KL-divergence base file", path);
  char magic[8] = {};
  in_.read(magic, 8);
  if (!in_ || std::memcmp(magic, "_logits_", 8) != 0)
    fail(
        "{}: not a file of base log-probabilities (no '_logits_' header; write one with "
        "--kl-divergence-base FILE and no --kl-divergence)",
        path);
  uint32_t ctx = 0;
  int32_t vocab = 0, chunks = 0;
  in_.read(reinterpret_cast<char*>(&ctx), 4);
  in_.read(reinterpret_cast<char*>(&vocab), 4);
  in_.read(reinterpret_cast<char*>(&chunks), 4);
  if (!in_) fail("{}: the base file ends inside its header", path);
  if (ctx < 4 || ctx > (1u << 24) || vocab <= 0 || chunks <= 0 || int64_t(ctx) * chunks > (int64_t(1) << 31))
    fail("{}: the base file's header is not plausible (n_ctx {}, n_vocab {}, {} chunks)", path, ctx, vocab,
         chunks);
  n_ctx_ = ctx, n_vocab_ = vocab, n_chunk_ = chunks;
  tokens_.resize(size_t(n_ctx_ * n_chunk_));
  in_.read(reinterpret_cast<char*>(tokens_.data()), std::streamsize(tokens_.size() * 4));
  if (!in_) fail("{}: the base file ends inside its tokens ({} expected)", path, tokens_.size());
}

void KldBase::read_chunk(std::vector<uint16_t>& recs) {
  recs.resize(size_t((n_ctx_ - 1 - n_ctx_ / 2) * kld_record_size(n_vocab_)));
  in_.read(reinterpret_cast<char*>(recs.data()), std::streamsize(recs.size() * 2));
  if (!in_) fail("{}: the base file ends before all its {} chunks (cut short?)", path_, n_chunk_);
}

void KldStats::add(const float* logits, int64_t n_vocab, const uint16_t* rec, int32_t target) {
  float mx = logits[0];
  int64_t imax = 0;
  for (int64_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > mx) mx = logits[i], imax = i;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(logits[i] - mx);
  const double log_z = double(mx) + std::log(sum);  // log-probability of i: logits[i] - log_z
  float scale, min_log_prob;
  std::memcpy(&scale, rec, 4);
  std::memcpy(&min_log_prob, rec + 2, 4);
  const uint16_t* codes = rec + 4;
  const double nll = log_z - double(logits[target]);
  const double nll_base = -(double(scale) * codes[target] + double(min_log_prob));
  sum_nll_ += nll, sum_nll2_ += nll * nll;
  sum_nll_base_ += nll_base, sum_nll_base2_ += nll_base * nll_base;
  sum_nll_nll_base_ += nll * nll_base;
  double kld = 0.0, top_base = 0.0;
  int64_t imax_base = -1;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const double lb = double(scale) * codes[i] + double(min_log_prob);
    if (i == 0 || lb > top_base) top_base = lb, imax_base = i;
    // Below e^-16 the base holds no resolution (its floor): those terms are left out, as llama.cpp does.
    if (lb > -16.0) kld += std::exp(lb) * (lb - (double(logits[i]) - log_z));
  }
  sum_kld_ += kld, sum_kld2_ += kld * kld;
  same_top_ += imax == imax_base ? 1 : 0;
  const double p_diff = std::exp(-nll) - std::exp(-nll_base);
  sum_p_diff_ += p_diff, sum_p_diff2_ += p_diff * p_diff, sum_p_diff4_ += p_diff * p_diff * p_diff * p_diff;
  kld_.push_back(float(kld));
  p_diff_.push_back(float(p_diff));
  ++count_;
}

void KldStats::print(std::FILE* f) const {
  if (count_ < 2) {
    std::fprintf(f, "KL divergence: %lld scored positions are too few for statistics\n", (long long)count_);
    return;
  }
  std::vector<float> k = kld_, d = p_diff_;
  std::sort(k.begin(), k.end());
  std::sort(d.begin(), d.end());
  const auto lp = mean_unc(sum_nll_, sum_nll2_, count_), lb = mean_unc(sum_nll_base_, sum_nll_base2_, count_);
  const double cov =
      (sum_nll_nll_base_ / double(count_) - lp.first * lb.first) / double(count_ - 1);  // of the two means
  const double ppl = std::exp(lp.first), ppl_base = std::exp(lb.first);
  const double ratio_unc = std::sqrt(std::max(0.0, lp.second * lp.second + lb.second * lb.second - 2 * cov));
  std::fprintf(f, "====== Perplexity statistics ======\n");
  std::fprintf(f, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl * lp.second);
  std::fprintf(f, "Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_base, ppl_base * lb.second);
  if (lp.second > 0 && lb.second > 0)
    std::fprintf(f, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cov / (lp.second * lb.second));
  std::fprintf(f, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", lp.first - lb.first, ratio_unc);
  std::fprintf(f, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", std::exp(lp.first - lb.first),
               std::exp(lp.first - lb.first) * ratio_unc);
  std::fprintf(f, "\n====== KL divergence statistics ======\n");
  const auto kl = mean_unc(sum_kld_, sum_kld2_, count_);
  std::fprintf(f, "Mean    KLD: %10.6f ± %10.6f\n", kl.first, kl.second);
  std::fprintf(f, "Maximum KLD: %10.6f\n", double(k.back()));
  for (float q : {0.999f, 0.99f, 0.95f, 0.9f})
    std::fprintf(f, "%4.1f%%   KLD: %10.6f\n", 100.0 * q, double(percentile(k, q)));
  std::fprintf(f, "Median  KLD: %10.6f\n", double(median(k)));
  for (float q : {0.1f, 0.05f, 0.01f, 0.001f})
    std::fprintf(f, "%4.1f%%   KLD: %10.6f\n", 100.0 * q, double(percentile(k, q)));
  std::fprintf(f, "Minimum KLD: %10.6f\n", double(k.front()));
  std::fprintf(f, "\n====== Token probability statistics ======\n");
  const auto pd = mean_unc(sum_p_diff_, sum_p_diff2_, count_);
  std::fprintf(f, "Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * pd.first, 100.0 * pd.second);
  std::fprintf(f, "Maximum Δp: %6.3f%%\n", 100.0 * d.back());
  for (float q : {0.999f, 0.99f, 0.95f, 0.9f, 0.75f})
    std::fprintf(f, "%4.1f%%   Δp: %6.3f%%\n", 100.0 * q, 100.0 * percentile(d, q));
  std::fprintf(f, "Median  Δp: %6.3f%%\n", 100.0 * median(d));
  for (float q : {0.25f, 0.1f, 0.05f, 0.01f, 0.001f})
    std::fprintf(f, "%4.1f%%   Δp: %6.3f%%\n", 100.0 * q, 100.0 * percentile(d, q));
  std::fprintf(f, "Minimum Δp: %6.3f%%\n", 100.0 * d.front());
  const auto mse = mean_unc(sum_p_diff2_, sum_p_diff4_, count_);
  const double rms = std::sqrt(mse.first);
  std::fprintf(f, "RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * rms,
               rms > 0 ? 100.0 * 0.5 / rms * mse.second : 0.0);
  const double st = same_top();
  std::fprintf(f, "Same top p: %6.3f ± %5.3f %%\n", 100.0 * st,
               100.0 * std::sqrt(st * (1.0 - st) / double(count_ - 1)));
}

}  // namespace tilellm::cli
