// Byte-level BPE merge loop (the algorithm llama.cpp uses for tokenizer.ggml.model = "gpt2"), and merge
// ranks.
//
// Same structure as spm.cpp: a linked list of pieces over the word and a heap of candidate merges, here
// ordered by merge rank (lowest first, leftmost on ties). Staleness is detected the same way: both pieces
// alive and the combined length unchanged means the pair is still exactly the text it was ranked for.
#include <queue>

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

namespace {

struct Piece {
  int prev;
  int next;
  uint32_t off;
  uint32_t len;
};

struct Candidate {
  int32_t rank;
  int left;
  int right;
  uint32_t len;
};

// Lowest rank on top; among equal ranks the leftmost pair.
struct Later {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

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

  std::vector<Piece> pieces;
  pieces.reserve(word.size());
  for (size_t off = 0; off < word.size();) {
    const size_t len = std::min(unicode::utf8_len(static_cast<uint8_t>(word[off])), word.size() - off);
    const int idx = static_cast<int>(pieces.size());
    pieces.push_back({idx - 1, off + len == word.size() ? -1 : idx + 1, static_cast<uint32_t>(off),
                      static_cast<uint32_t>(len)});
    off += len;
  }

  std::string scratch;
  std::priority_queue<Candidate, std::vector<Candidate>, Later> heap;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Piece& l = pieces[left];
    const Piece& r = pieces[right];
    const int32_t rank = ranks.rank(word.substr(l.off, l.len), word.substr(r.off, r.len), scratch);
    if (rank < 0) return;
    heap.push({rank, left, right, l.len + r.len});
  };

  for (size_t i = 1; i < pieces.size(); ++i) try_pair(static_cast<int>(i - 1), static_cast<int>(i));

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Piece& l = pieces[c.left];
    Piece& r = pieces[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) pieces[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }

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
