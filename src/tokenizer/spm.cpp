// SentencePiece-style merge loop (the algorithm llama.cpp uses for tokenizer.ggml.model = "llama").
//
// Pieces form a doubly linked list over the text; a max-heap holds candidate merges of adjacent pieces. A
// popped candidate is stale when one side was absorbed or has grown since it was pushed; since a left piece
// only grows by absorbing its right neighbour, "both alive and total length unchanged" identifies a fresh
// candidate exactly.
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace tilellm {

namespace {

struct Piece {
  int prev;
  int next;
  uint32_t off;  // byte offset in the text
  uint32_t len;  // bytes; 0 once merged into its left neighbour
};

struct Candidate {
  float score;
  int left;
  int right;
  uint32_t len;
};

// Highest score on top; among equal scores the leftmost pair.
struct Lower {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

int32_t byte_token(const Vocab& v, uint8_t b) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
  int32_t id = v.find(std::string_view(name, 6));
  if (id < 0) id = v.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
  return id < 0 ? v.unk : id;
}

}  // namespace

void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Piece> pieces;
  pieces.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const int idx = static_cast<int>(pieces.size());
    pieces.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, static_cast<uint32_t>(off),
                      static_cast<uint32_t>(len)});
    off += len;
  }

  std::vector<Candidate> storage;
  storage.reserve(pieces.size() * 2);
  std::priority_queue<Candidate, std::vector<Candidate>, Lower> heap(Lower{}, std::move(storage));
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = pieces[left].len + pieces[right].len;
    const int32_t id = v.find(text.substr(pieces[left].off, len));
    if (id < 0) return;
    heap.push({v.score[id], left, right, len});
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

  for (int i = pieces.empty() ? -1 : 0; i != -1; i = pieces[i].next) {
    const std::string_view s = text.substr(pieces[i].off, pieces[i].len);
    const int32_t id = v.find(s);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char b : s) {
      const int32_t bid = byte_token(v, static_cast<uint8_t>(b));
      if (bid >= 0) out.push_back(bid);
    }
  }
}

}  // namespace tilellm
