// KL-divergence against a base model's log-probabilities, as llama-perplexity computes it, through the same
// file (`--kl-divergence-base FILE`), so either program can write the base and either can score against it.
//
// The file (little-endian, llama-perplexity's layout):
//   "_logits_" (8 bytes), uint32 n_ctx, int32 n_vocab, int32 n_chunk, int32 tokens[n_chunk * n_ctx];
//   then per chunk, for each scored position j in [n_ctx/2, n_ctx - 1) (perplexity's second half), one record
//   of nv = 2 * ceil(n_vocab / 2) + 4 uint16: two floats (scale, min_log_prob) in the first 4, then n_vocab
//   codes (padded to even): log p_i = scale * code_i + min_log_prob, where min_log_prob is the
//   log-probability of max(min logit, max logit - 16) and scale spans from there to the top logit in 65535
//   steps (codes of logits below that floor are 0).
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tilellm::cli {

// uint16 entries of one record.
inline int64_t kld_record_size(int64_t n_vocab) {
  return 2 * ((n_vocab + 1) / 2) + 4;
}

// Encodes one position's logits [n_vocab] into rec [kld_record_size(n_vocab)]; returns its nll of `target`.
double kld_encode(const float* logits, int64_t n_vocab, int32_t target, uint16_t* rec);

class KldBaseWriter {
 public:
  // Writes the header and the tokens; throws naming the file if it cannot be written.
  KldBaseWriter(const std::string& path, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                const std::vector<int32_t>& tokens);
  void write(const std::vector<uint16_t>& records);  // whole records, in order
  void close();                                      // flushes; throws if a write failed

 private:
  std::string path_;
  std::ofstream out_;
};

class KldBase {
 public:
  // Reads the header and the tokens; a file that is not a base file, or is cut short, is refused by name.
  explicit KldBase(const std::string& path);
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t n_chunk() const { return n_chunk_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The records of the next chunk (n_ctx - 1 - n_ctx/2 of them) into recs; throws if the file ends early.
  void read_chunk(std::vector<uint16_t>& recs);

 private:
  std::string path_;
  std::ifstream in_;
  int64_t n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0;
  std::vector<int32_t> tokens_;
};

// The statistics llama-perplexity prints for --kl-divergence, over every scored position.
class KldStats {
 public:
  // One position: the candidate's logits [n_vocab], the base's record, the next token.
  void add(const float* logits, int64_t n_vocab, const uint16_t* rec, int32_t target);
  int64_t count() const { return count_; }
  double mean_kld() const { return count_ ? sum_kld_ / double(count_) : 0.0; }
  double same_top() const { return count_ ? double(same_top_) / double(count_) : 0.0; }
  void print(std::FILE* f) const;

 private:
  double sum_nll_ = 0, sum_nll2_ = 0, sum_nll_base_ = 0, sum_nll_base2_ = 0, sum_nll_nll_base_ = 0;
  double sum_kld_ = 0, sum_kld2_ = 0, sum_p_diff_ = 0, sum_p_diff2_ = 0, sum_p_diff4_ = 0;
  int64_t same_top_ = 0, count_ = 0;
  std::vector<float> kld_, p_diff_;
};

}  // namespace tilellm::cli
