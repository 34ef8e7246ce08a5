// SentencePiece-style merge loop (the algorithm llama.cpp uses for tokenizer.ggml.model = "llama").
//
// The merge loop is merge.h's, shared with bpe.cpp; here a pair's priority is the score of the token the two
// pieces form (highest first, leftmost on ties).
#include <optional>

#include "tokenizer/merge.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace tilellm {

namespace {

int32_t byte_token(const Vocab& v, uint8_t b) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
  int32_t id = v.find(std::string_view(name, 6));
  if (id < 0) id = v.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
  return id < 0 ? v.unk : id;
}

}  // namespace

void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  const std::vector<MergePiece> pieces =
      merge_pieces<float>(text, [&](const MergePiece& l, const MergePiece& r) -> std::optional<float> {
        const int32_t id = v.find(text.substr(l.off, l.len + r.len));
        if (id < 0) return std::nullopt;
        return v.score[id];
      });

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
