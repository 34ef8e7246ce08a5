// The pairwise merge loop shared by the SentencePiece (spm.cpp) and byte-level BPE (bpe.cpp) tokenizers.
//
// The text starts as a doubly linked list of its UTF-8 characters; a heap holds candidate merges of adjacent
// pieces, best priority on top and the leftmost pair among equals. A popped candidate is stale when one side
// was absorbed or has grown since it was pushed; since a left piece only grows by absorbing its right
// neighbour, "both alive and total length unchanged" identifies a fresh candidate exactly. The two tokenizers
// differ only in the priority of a pair: SPM the merged token's score, BPE the (negated) merge rank.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace tilellm {

struct MergePiece {
  int prev;
  int next;
  uint32_t off;  // byte offset in the text
  uint32_t len;  // bytes; 0 once merged into its left neighbour
};

// Merges `text` as far as `priority(left_piece, right_piece)` allows (std::nullopt: the pair cannot merge;
// otherwise a higher value merges first) and returns the pieces; walk them from index 0 along `next`.
template <typename P, typename PriorityFn>
std::vector<MergePiece> merge_pieces(std::string_view text, PriorityFn&& priority) {
  std::vector<MergePiece> pieces;
  pieces.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const int idx = static_cast<int>(pieces.size());
    pieces.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, static_cast<uint32_t>(off),
                      static_cast<uint32_t>(len)});
    off += len;
  }

  struct Candidate {
    P prio;
    int left;
    int right;
    uint32_t len;
  };
  struct Worse {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.prio < b.prio || (a.prio == b.prio && a.left > b.left);
    }
  };
  std::vector<Candidate> storage;
  storage.reserve(pieces.size() * 2);
  std::priority_queue<Candidate, std::vector<Candidate>, Worse> heap(Worse{}, std::move(storage));
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::optional<P> p = priority(pieces[left], pieces[right]);
    if (p) heap.push({*p, left, right, pieces[left].len + pieces[right].len});
  };

  for (size_t i = 1; i < pieces.size(); ++i) try_pair(static_cast<int>(i - 1), static_cast<int>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    MergePiece& l = pieces[c.left];
    MergePiece& r = pieces[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) pieces[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }
  return pieces;
}

}  // namespace tilellm
