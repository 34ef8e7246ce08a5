// Byte-level BPE merge loop (the algorithm llama.cpp uses for tokenizer.ggml.model = "gpt2"), and merge
// ranks.
//
// The merge loop is merge.h's, shared with spm.cpp; here a pair's priority is its merge rank (lowest first,
// leftmost on ties).
#include <optional>

#include "tokenizer/merge.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace tilellm {

void BpeRanks::build(std::vector<std::string> lines) {
  lines_ = std::move(lines);
  rank_.clear();
  rank_.reserve(lines_.size());
  for (size_t i = 0; i < lines_.size(); ++i) {
    // The separator is the first space after the first character (a left part may itself start with a space).
    if (lines_[i].find(' ', 1) == std::string::npos) continue;
    rank_.emplace(std::string_view(lines_[i]), static_cast<int32_t>(i));
  }
}

int32_t BpeRanks::rank(std::string_view left, std::string_view right, std::string& scratch) const {
  scratch.assign(left);
  scratch += ' ';
  scratch += right;
  auto it = rank_.find(scratch);
  if (it == rank_.end()) return -1;
  // Only a split at the line's separator counts (guards against a left part containing a space).
  if (it->first.find(' ', 1) != left.size()) return -1;
  return it->second;
}

void bpe_tokenize_word(const Vocab& v, const BpeRanks& ranks, std::string_view word, bool ignore_merges,
                       std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (ignore_merges) {
    const int32_t id = v.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  std::string scratch;
  const std::vector<MergePiece> pieces =
      merge_pieces<int32_t>(word, [&](const MergePiece& l, const MergePiece& r) -> std::optional<int32_t> {
        const int32_t rank = ranks.rank(word.substr(l.off, l.len), word.substr(r.off, r.len), scratch);
        if (rank < 0) return std::nullopt;
        return -rank;  // the lowest rank merges first
      });

  for (int i = 0; i != -1; i = pieces[i].next) {
    const std::string_view s = word.substr(pieces[i].off, pieces[i].len);
    const int32_t id = v.find(s);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // A piece that is not a token: its single bytes that are tokens (llama.cpp drops the others).
    for (size_t j = 0; j < s.size(); ++j) {
      const int32_t bid = v.find(s.substr(j, 1));
      if (bid >= 0) out.push_back(bid);
    }
  }
}

}  // namespace tilellm
