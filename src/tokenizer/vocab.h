// Vocabulary tables shared by the SPM and BPE merge loops (internal to src/tokenizer/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tilellm {

struct Vocab {
  std::vector<std::string> text;  // [n_vocab] token text as stored in the GGUF
  std::vector<float> score;       // [n_vocab] SPM merge priority (higher merges first); 0 when absent
  std::vector<uint32_t> attr;     // [n_vocab] TokenAttr bits
  // Text -> id. Keys view into `text`, which is never resized after the map is built.
  std::unordered_map<std::string_view, int32_t> to_id;
  int32_t unk = -1;

  int32_t n() const { return static_cast<int32_t>(text.size()); }
  int32_t find(std::string_view s) const {
    auto it = to_id.find(s);
    return it == to_id.end() ? -1 : it->second;
  }
};

// BPE merge ranks: "left right" -> rank (the merge's index in tokenizer.ggml.merges; lower merges first).
class BpeRanks {
 public:
  // Lines without a separating space are ignored; a repeated line keeps its first rank.
  void build(std::vector<std::string> lines);
  // Rank of merging `left` with `right`, or -1. `scratch` is a reusable buffer.
  int32_t rank(std::string_view left, std::string_view right, std::string& scratch) const;
  size_t size() const { return lines_.size(); }

 private:
  std::vector<std::string> lines_;
  std::unordered_map<std::string_view, int32_t> rank_;  // keys view into lines_
};

// SentencePiece-style tokenization of one text fragment whose spaces are already "▁": start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the highest-scoring token (leftmost
// on ties), then emit each piece's id or, for pieces that are not tokens, one byte token per byte.
void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

// Byte-level BPE of one pre-tokenized word (in GPT-2's byte alphabet): start from its characters, repeatedly
// merge the adjacent pair with the lowest merge rank (leftmost on ties), then emit ids; a piece that is not a
// token falls back to its single bytes that are. With `ignore_merges`, a word that is a token is emitted
// whole.
void bpe_tokenize_word(const Vocab& v, const BpeRanks& ranks, std::string_view word, bool ignore_merges,
                       std::vector<int32_t>& out);

}  // namespace tilellm
