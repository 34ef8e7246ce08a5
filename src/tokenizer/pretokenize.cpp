// Hand-written matchers for the BPE pre-tokenizer regexes (see pretokenize.h).
//
// Each alternation regex becomes a function `match(frag, pos) -> end` returning the end of the
// leftmost-longest alternative that matches at `pos` (regexes of this family always match something at every
// position, so the words tile the fragment). The matchers look at code point flags only inside the current
// fragment: past its end a code point reads as "none" (flags 0), which is how `\s+(?!\S)` at a fragment's end
// and ` ?X` before it behave in llama.cpp.
#include "tokenizer/pretokenize.h"

#include <array>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace tilellm {

namespace {

using unicode::LETTER;
using unicode::NUMBER;
using unicode::PUNCTUATION;
using unicode::WHITESPACE;

constexpr uint32_t kNone = 0xFFFFFFFF;  // "code point" past the fragment end

// One fragment [begin, end) of the code point array, with flags precomputed for the whole text.
struct Frag {
  const uint32_t* cp;
  const uint16_t* fl;
  size_t begin;
  size_t end;
  uint32_t at(size_t i) const { return i < end ? cp[i] : kNone; }
  uint16_t flags(size_t i) const { return i < end ? fl[i] : 0; }
};

// [^\s\p{L}\p{N}]: anything categorised that is not whitespace, a letter or a number. Flags 0 (past the
// fragment end) never match.
bool is_other(uint16_t f) {
  return f != 0 && !(f & (WHITESPACE | LETTER | NUMBER));
}

uint32_t ascii_lower(uint32_t c) {
  return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

// 's|'t|'re|'ve|'m|'ll|'d at pos; returns the end or 0. `fold` makes it case-insensitive (Llama 3 / Qwen2 use
// (?i:...)). Only ASCII letters fold to these letters, so ASCII folding is exact.
size_t match_contraction(const Frag& f, size_t pos, bool fold) {
  if (f.at(pos) != '\'' || pos + 1 >= f.end) return 0;
  const uint32_t c1 = fold ? ascii_lower(f.at(pos + 1)) : f.at(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
  if (pos + 2 < f.end) {
    const uint32_t c2 = fold ? ascii_lower(f.at(pos + 2)) : f.at(pos + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return pos + 3;
  }
  return 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const Frag& f, size_t pos) {
  if (size_t e = match_contraction(f, pos, /*fold=*/false)) return e;
  const uint32_t c = f.at(pos);
  const size_t start = pos + (c == ' ' ? 1 : 0);  // the optional leading space
  const uint16_t f2 = f.flags(start);
  size_t p = start;
  if (f2 & LETTER) {
    while (f.flags(p) & LETTER) ++p;
    return p;
  }
  if (f2 & NUMBER) {
    while (f.flags(p) & NUMBER) ++p;
    return p;
  }
  if (is_other(f2)) {
    while (is_other(f.flags(p))) ++p;
    return p;
  }
  size_t n = 0;
  while (f.flags(pos + n) & WHITESPACE) ++n;
  // \s+(?!\S): a run followed by a non-space inside the fragment leaves its last space to the next word.
  if (n > 1 && pos + n < f.end) return pos + n - 1;
  if (n > 0) return pos + n;
  return pos + 1;
}

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
// \s+(?!\S)|\s+
size_t match_llama3(const Frag& f, size_t pos, size_t max_digits) {
  if (size_t e = match_contraction(f, pos, /*fold=*/true)) return e;
  const uint32_t c = f.at(pos);
  const uint16_t fc = f.flags(pos);
  const bool newline = c == '\r' || c == '\n';
  // [^\r\n\p{L}\p{N}]?\p{L}+ : one optional non-letter/non-number prefix (even a space or punctuation).
  if (!newline && !(fc & NUMBER) && ((fc & LETTER) || (f.flags(pos + 1) & LETTER))) {
    size_t p = pos + 1;
    while (f.flags(p) & LETTER) ++p;
    return p;
  }
  if (fc & NUMBER) {
    size_t p = pos;
    while (p < pos + max_digits && (f.flags(p) & NUMBER)) ++p;
    return p;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const uint16_t f2 = c == ' ' ? f.flags(pos + 1) : fc;
  if (!(f2 & (WHITESPACE | LETTER | NUMBER)) && fc != 0) {
    size_t p = pos + (c == ' ' ? 1 : 0);
    while (is_other(f.flags(p))) ++p;
    while (f.at(p) == '\r' || f.at(p) == '\n') ++p;
    return p;
  }
  size_t n = 0;
  size_t after_last_newline = 0;
  while (f.flags(pos + n) & WHITESPACE) {
    const uint32_t w = f.at(pos + n);
    if (w == '\r' || w == '\n') after_last_newline = pos + n + 1;
    ++n;
  }
  if (after_last_newline > 0) return after_last_newline;  // \s*[\r\n]+
  if (n > 1 && pos + n < f.end) return pos + n - 1;       // \s+(?!\S)
  if (n > 0) return pos + n;                              // \s+
  return pos + 1;
}

struct Text {
  const std::vector<uint32_t>& cp;
  std::vector<uint16_t> fl;
};

// Applies `match` to every fragment, splitting it into consecutive matches.
template <typename Match>
std::vector<size_t> split_alternation(const Text& t, const std::vector<size_t>& frags, Match match) {
  std::vector<size_t> out;
  out.reserve(frags.size() * 2);
  size_t begin = 0;
  for (size_t len : frags) {
    const Frag f{t.cp.data(), t.fl.data(), begin, begin + len};
    for (size_t pos = f.begin; pos < f.end;) {
      const size_t e = match(f, pos);
      out.push_back(e - pos);
      pos = e;
    }
    begin += len;
  }
  return out;
}

// Splits every fragment into maximal runs of code points where `in_class` holds (each run is a match) and the
// gaps between them. With `each`, every matching code point is its own match (the regex has no `+`).
template <typename Pred>
std::vector<size_t> split_class(const Text& t, const std::vector<size_t>& frags, Pred in_class, bool each) {
  std::vector<size_t> out;
  out.reserve(frags.size() * 2);
  size_t begin = 0;
  for (size_t len : frags) {
    const size_t end = begin + len;
    size_t pos = begin;
    while (pos < end) {
      size_t p = pos;
      const bool match = in_class(t.cp[p], t.fl[p]);
      if (match && each) {
        ++p;
      } else {
        while (p < end && in_class(t.cp[p], t.fl[p]) == match) ++p;
      }
      out.push_back(p - pos);
      pos = p;
    }
    begin = end;
  }
  return out;
}

// [0-9][0-9][0-9]: leftmost non-overlapping triples of ASCII digits, the rest left as gaps.
std::vector<size_t> split_digit_triples(const Text& t, const std::vector<size_t>& frags) {
  auto digit = [&](size_t i) { return t.cp[i] >= '0' && t.cp[i] <= '9'; };
  std::vector<size_t> out;
  size_t begin = 0;
  for (size_t len : frags) {
    const size_t end = begin + len;
    size_t gap = begin;
    size_t pos = begin;
    while (pos + 3 <= end) {
      if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
        if (pos > gap) out.push_back(pos - gap);
        out.push_back(3);
        pos += 3;
        gap = pos;
      } else {
        ++pos;
      }
    }
    if (end > gap) out.push_back(end - gap);
    begin = end;
  }
  return out;
}

// \p{N} as llama.cpp evaluates it: the category of non-ASCII code points, ASCII digits for ASCII.
bool number_class(uint32_t /*cp*/, uint16_t f) {
  return (f & NUMBER) && !(f & WHITESPACE);
}

// [\p{P}\$\+<=>\^~\|]: every ASCII punctuation or symbol character except '`', plus non-ASCII punctuation.
bool punct_class(uint32_t cp, uint16_t f) {
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x5F) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return (f & PUNCTUATION) && !(f & WHITESPACE);
}

std::vector<size_t> split(PreTokenizerKind kind, const Text& t) {
  std::vector<size_t> frags;
  if (!t.cp.empty()) frags.push_back(t.cp.size());
  auto gpt2 = [](const Frag& f, size_t p) { return match_gpt2(f, p); };
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return split_alternation(t, frags, gpt2);
    case PreTokenizerKind::kSmollm:
      frags = split_class(t, frags, number_class, /*each=*/true);
      return split_alternation(t, frags, gpt2);
    case PreTokenizerKind::kLlama3:
      return split_alternation(t, frags, [](const Frag& f, size_t p) { return match_llama3(f, p, 3); });
    case PreTokenizerKind::kQwen2:
      return split_alternation(t, frags, [](const Frag& f, size_t p) { return match_llama3(f, p, 1); });
    case PreTokenizerKind::kDefault:
      frags = split_class(t, frags, punct_class, /*each=*/false);
      frags = split_alternation(t, frags, gpt2);
      frags = split_class(t, frags, number_class, /*each=*/false);
      return split_digit_triples(t, frags);
  }
  return frags;
}

Text make_text(const std::vector<uint32_t>& cpts) {
  Text t{cpts, {}};
  t.fl.resize(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) t.fl[i] = unicode::flags(cpts[i]);
  return t;
}

struct NamedPre {
  const char* name;
  PreTokenizerInfo info;
};

using K = PreTokenizerKind;
// The names llama.cpp maps onto the five regex families implemented here, with the settings it attaches.
// Fields: kind, clean_spaces, ignore_merges, add_bos_default, no_bos.
constexpr NamedPre kPreTokenizers[] = {
    {"default", {K::kDefault, true, false, -1, false}},
    {"llama3", {K::kLlama3, true, true, 1, false}},
    {"llama-v3", {K::kLlama3, true, true, 1, false}},
    {"llama-bpe", {K::kLlama3, true, true, 1, false}},
    {"falcon3", {K::kLlama3, true, true, 1, false}},
    {"falcon-h1", {K::kLlama3, true, true, 1, false}},
    {"pixtral", {K::kLlama3, true, true, 1, false}},
    {"midm-2.0", {K::kLlama3, true, true, 1, false}},
    {"lfm2", {K::kLlama3, true, true, 1, false}},
    {"jina-v5-nano", {K::kLlama3, true, true, 1, false}},
    {"dbrx", {K::kLlama3, true, false, -1, false}},
    {"smaug-bpe", {K::kLlama3, true, false, -1, false}},
    {"chatglm-bpe", {K::kLlama3, true, false, -1, true}},
    {"glm4", {K::kLlama3, true, true, -1, true}},
    {"glm5", {K::kLlama3, true, true, -1, true}},
    // "gpt2" is not a llama.cpp name (it spells "gpt-2"); accepted as an alias since it is unambiguous.
    {"gpt2", {K::kGpt2, true, false, -1, false}},
    {"gpt-2", {K::kGpt2, true, false, -1, false}},
    {"phi-2", {K::kGpt2, true, false, -1, false}},
    {"jina-es", {K::kGpt2, true, false, -1, false}},
    {"jina-de", {K::kGpt2, true, false, -1, false}},
    {"jina-v2-es", {K::kGpt2, true, false, -1, false}},
    {"jina-v2-de", {K::kGpt2, true, false, -1, false}},
    {"gigachat", {K::kGpt2, true, false, -1, false}},
    {"a.x-4.0", {K::kGpt2, true, false, -1, false}},
    {"mellum", {K::kGpt2, true, false, -1, false}},
    {"modern-bert", {K::kGpt2, true, false, -1, false}},
    {"mpt", {K::kGpt2, true, false, -1, false}},
    {"olmo", {K::kGpt2, true, false, -1, false}},
    {"jais", {K::kGpt2, true, false, -1, false}},
    {"exaone4", {K::kGpt2, true, false, -1, false}},
    {"trillion", {K::kGpt2, false, false, -1, false}},
    {"granite-docling", {K::kGpt2, false, false, -1, false}},
    {"smollm", {K::kSmollm, false, false, -1, false}},
    {"starcoder", {K::kSmollm, true, false, -1, false}},
    {"refact", {K::kSmollm, true, false, -1, false}},
    {"command-r", {K::kSmollm, false, false, -1, false}},
    {"codeshell", {K::kSmollm, true, false, -1, false}},
    {"exaone", {K::kSmollm, true, false, -1, false}},
    {"minerva-7b", {K::kSmollm, true, false, -1, false}},
    {"mellum2", {K::kSmollm, true, false, -1, false}},
    {"qwen2", {K::kQwen2, false, false, -1, false}},
    {"deepseek-r1-qwen", {K::kQwen2, false, false, -1, false}},
    {"kormo", {K::kQwen2, false, false, -1, false}},
    {"f2llmv2", {K::kQwen2, false, false, -1, false}},
    {"megrez", {K::kQwen2, true, false, -1, false}},
    {"stablelm2", {K::kQwen2, true, false, -1, false}},
    {"hunyuan", {K::kQwen2, false, false, -1, false}},
    {"solar-open", {K::kQwen2, false, false, -1, false}},
};

}  // namespace

PreTokenizerInfo pre_tokenizer_info(std::string_view name) {
  if (name.empty()) return kPreTokenizers[0].info;
  for (const auto& p : kPreTokenizers) {
    if (name == p.name) return p.info;
  }
  std::string known;
  for (const auto& p : kPreTokenizers) {
    if (!known.empty()) known += ", ";
    known += p.name;
  }
  fail("unknown BPE pre-tokenizer '{}' (tokenizer.ggml.pre); supported: {}", name, known);
}

std::vector<size_t> pre_tokenize_lengths(PreTokenizerKind kind, const std::vector<uint32_t>& cpts) {
  return split(kind, make_text(cpts));
}

std::vector<std::string> pre_tokenize(PreTokenizerKind kind, std::string_view text) {
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);
  const std::vector<size_t> lengths = split(kind, make_text(cpts));

  // The byte alphabet of every byte value, as UTF-8, computed once.
  static const std::array<std::string, 256> kByteChars = [] {
    std::array<std::string, 256> a;
    for (int b = 0; b < 256; ++b)
      unicode::append_utf8(a[b], unicode::byte_to_codepoint(static_cast<uint8_t>(b)));
    return a;
  }();

  std::vector<std::string> words;
  words.reserve(lengths.size());
  std::string utf8;
  size_t pos = 0;
  for (size_t len : lengths) {
    utf8.clear();
    for (size_t i = pos; i < pos + len; ++i) unicode::append_utf8(utf8, cpts[i]);
    std::string& w = words.emplace_back();
    w.reserve(utf8.size() * 2);
    for (unsigned char b : utf8) w += kByteChars[b];
    pos += len;
  }
  return words;
}

}  // namespace tilellm
