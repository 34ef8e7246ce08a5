// Tokenizers built from GGUF metadata, token for token equal to llama.cpp's:
//   tokenizer.ggml.model = "llama"  SentencePiece-style: merge adjacent pieces by highest score, unknown
//   pieces
//                                   fall back to <0xXX> byte tokens, spaces become U+2581 ("▁"), optional
//                                   space prefix (TinyLlama/Llama 2: yes; Gemma 3: no).
//   tokenizer.ggml.model = "gpt2"   byte-level BPE: the text is split into words by the pre-tokenizer regex
//   named
//                                   by tokenizer.ggml.pre, bytes are mapped to GPT-2's printable alphabet,
//                                   and words are merged by merge rank.
// Before either, special-token texts are cut out of the text, longest first: user-defined tokens always,
// control tokens only when `parse_special` is set.
//
//   auto gguf = tilellm::GgufFile::open("model.gguf");
//   auto tok = tilellm::Tokenizer::from_gguf(*gguf);
//   std::vector<int32_t> ids = tok->encode("Hello world", /*add_special=*/true, /*parse_special=*/false);
//   tilellm::Utf8Stream out;
//   for (int32_t id : ids) std::fputs(out.push(tok->token_to_piece(id)).c_str(), stdout);
//   std::fputs(out.flush().c_str(), stdout);
//
// A Tokenizer is immutable after construction; encode/decode may run concurrently from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tilellm {

class GgufFile;

// Token attributes, a bit set (llama.cpp's llama_token_attr values). Derived from tokenizer.ggml.token_type
// (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte) and adjusted by token text the way
// llama.cpp does (e.g. "<|im_end|>" is made control).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,  // whitespace before this special token is dropped when it is cut out of text
  kAttrRstrip = 1u << 8,  // whitespace after it is dropped
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from `f` (the file may be closed afterwards: everything is copied). Throws
  // tilellm::Error naming the file and key on missing or invalid metadata, an unknown tokenizer model, or an
  // unknown BPE pre-tokenizer name.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Like llama.cpp's llama_tokenize(text, add_special, parse_special): add_special adds BOS (and EOS) when
  // the model's metadata asks for it (add_bos()/add_eos()); parse_special turns control-token texts (e.g.
  // "<|im_start|>", "<start_of_turn>") into their ids. Invalid UTF-8 never throws.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Bytes of one token: byte-fallback tokens give their byte, SPM "▁" becomes a space, BPE tokens are mapped
  // back from GPT-2's byte alphabet. Control and unknown tokens give "" unless render_special. A piece may
  // end in the middle of a UTF-8 character (feed it through Utf8Stream when printing). Out-of-range ids give
  // "".
  std::string token_to_piece(int32_t id, bool render_special = false) const;

  // Text of a token sequence, as llama.cpp's llama_detokenize(remove_special=false, unparse_special=
  // render_special): pieces concatenated, the space an SPM space prefix added before the first token removed,
  // and, for BPE pre-tokenizers that ask for it, spaces before ?!., and contractions cleaned up.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 when absent
  int32_t eos() const;  // -1 when absent
  int32_t eot() const;  // end of turn (e.g. <|im_end|>, <end_of_turn>); -1 when absent
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;
  // End of generation: eos, eot, eom and every token whose text llama.cpp treats as ending a turn
  // (<|im_end|>, <end_of_turn>, <|eot_id|>, <|endoftext|>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;      // sorted
  int32_t find_token(std::string_view text) const;  // exact token text (SPM texts use "▁"); -1 if absent
  std::string_view token_text(int32_t id) const;    // raw vocabulary text; "" for out-of-range ids
  uint32_t token_attr(int32_t id) const;            // TokenAttr bits; 0 for out-of-range ids
  float token_score(int32_t id) const;
  std::string_view model_name() const;  // "gpt2" / "llama"
  std::string_view pre_name() const;    // tokenizer.ggml.pre ("" for SPM models)

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streams token bytes to a terminal without ever splitting a UTF-8 character: push() returns the complete
// characters so far and keeps an incomplete tail (at most 3 bytes); bytes that can never become a valid
// character come out as U+FFFD right away. flush() returns what remains, an incomplete tail as U+FFFD.
class Utf8Stream {
 public:
  std::string push(std::string_view bytes);
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace tilellm
