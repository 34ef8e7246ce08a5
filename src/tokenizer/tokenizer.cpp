// Tokenizer construction from GGUF metadata, special-token partitioning, encode/decode (see tokenizer.h).
//
// The metadata rules follow llama.cpp's vocabulary loader so that ids match it exactly: default special ids
// per model type, add_bos/add_eos defaults, special tokens recognised by their text (and made control), the
// end-of-generation set, and the order in which special-token texts are cut out of the input.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace tilellm {

namespace {

enum class Model { kSpm, kBpe };

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

bool ascii_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos);
  s = std::move(out);
}

// A piece of the input after special tokens are cut out: either raw text [off, off+len) or one token id.
struct Fragment {
  int32_t token;  // -1 for raw text
  size_t off;
  size_t len;
};

// Text -> token attribute bit for tokenizer.ggml.token_type values.
uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case 1:
      return kAttrNormal;
    case 2:
      return kAttrUnknown;
    case 3:
      return kAttrControl;
    case 4:
      return kAttrUserDefined;
    case 5:
      return kAttrUnused;
    case 6:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

}  // namespace

struct Tokenizer::Impl {
  Model model = Model::kSpm;
  std::string model_name;
  std::string pre_name;
  PreTokenizerInfo pre;
  Vocab vocab;
  BpeRanks ranks;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  bool clean_spaces = false;

  std::vector<int32_t> eog;             // sorted
  std::vector<int32_t> special_tokens;  // control/user-defined/unknown ids, longest text first
  // Trie over the special-token texts, to find in one pass which of them occur in a text at all (Gemma has
  // 6k of them). Edge key: node << 8 | byte -> child node; node 0 is the root.
  std::unordered_map<uint64_t, int32_t> trie_next;
  std::vector<int32_t> trie_special;  // [node] index into special_tokens of the text ending here, or -1
  std::vector<std::string> pieces;    // [n_vocab] token_to_piece(id, render_special=true)

  void load(const GgufFile& f);
  void detect_special_tokens();
  void build_trie();
  std::string make_piece(int32_t id) const;
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
};

void Tokenizer::Impl::load(const GgufFile& f) {
  const std::string& path = f.path();
  auto model_opt = f.get_string_opt("tokenizer.ggml.model");
  if (!model_opt) fail("{}: no tokenizer: metadata 'tokenizer.ggml.model' is missing", path);
  model_name = *model_opt;
  const std::string pre_key = f.get_string_opt("tokenizer.ggml.pre").value_or("");

  // Defaults per model type, before the metadata overrides them (llama.cpp's values).
  if (model_name == "llama") {
    model = Model::kSpm;
    bos = 1;
    eos = 2;
    unk = 0;
    add_space_prefix = true;
    add_bos = true;
    clean_spaces = false;
  } else if (model_name == "gpt2") {
    model = Model::kBpe;
    bos = 11;
    eos = 11;
    pre_name = pre_key;
    pre = pre_tokenizer_info(pre_key);  // throws on an unknown name
    clean_spaces = pre.clean_spaces;
    if (pre.add_bos_default == 1) add_bos = true;
    if (pre.no_bos) bos = -1;
  } else {
    fail(
        "{}: unsupported tokenizer model '{}' (tokenizer.ggml.model); supported: llama (SentencePiece), gpt2 "
        "(BPE)",
        path, model_name);
  }
  add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", add_space_prefix);

  if (!f.has("tokenizer.ggml.tokens"))
    fail("{}: metadata 'tokenizer.ggml.tokens' is missing (no vocabulary)", path);
  const std::vector<std::string_view> texts = f.get_string_array("tokenizer.ggml.tokens");
  if (texts.empty()) fail("{}: metadata 'tokenizer.ggml.tokens' is empty", path);
  if (texts.size() > static_cast<size_t>(INT32_MAX)) fail("{}: 'tokenizer.ggml.tokens' is too large", path);
  const size_t n = texts.size();

  std::vector<float> scores(n, 0.0f);
  if (const GgufValue* v = f.find("tokenizer.ggml.scores")) {
    std::vector<float> s;
    if (v->type == GgufType::ARRAY && (v->elem_type == GgufType::INT32 || v->elem_type == GgufType::INT64)) {
      for (int64_t x : f.get_int_array("tokenizer.ggml.scores")) s.push_back(static_cast<float>(x));
    } else {
      s = f.get_float_array("tokenizer.ggml.scores");
    }
    if (s.size() < n) fail("{}: 'tokenizer.ggml.scores' has {} entries for {} tokens", path, s.size(), n);
    std::copy_n(s.begin(), n, scores.begin());
  }
  std::vector<uint32_t> attrs(n, kAttrNormal);
  if (f.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
    if (types.size() < n)
      fail("{}: 'tokenizer.ggml.token_type' has {} entries for {} tokens", path, types.size(), n);
    for (size_t i = 0; i < n; ++i) attrs[i] = attr_from_type(types[i]);
  }

  vocab.text.resize(n);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp renames empty tokens so that every text is a distinct key.
    vocab.text[i] = texts[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : std::string(texts[i]);
  }
  vocab.score = std::move(scores);
  vocab.attr = std::move(attrs);
  vocab.to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = vocab.to_id.emplace(std::string_view(vocab.text[i]), static_cast<int32_t>(i));
    if (!inserted) {
      fail("{}: 'tokenizer.ggml.tokens' holds '{}' twice (ids {} and {})", path, vocab.text[i], it->second,
           i);
    }
  }

  if (model == Model::kBpe) {
    if (!f.has("tokenizer.ggml.merges")) fail("{}: BPE tokenizer without 'tokenizer.ggml.merges'", path);
    const std::vector<std::string_view> lines = f.get_string_array("tokenizer.ggml.merges");
    ranks.build(std::vector<std::string>(lines.begin(), lines.end()));
  }

  // Special ids: a default outside the vocabulary is dropped; a metadata id outside it is ignored.
  const int32_t n_vocab = static_cast<int32_t>(n);
  auto clamp_default = [&](int32_t& id) {
    if (id >= n_vocab) id = -1;
  };
  for (int32_t* id : {&bos, &eos, &unk}) clamp_default(*id);
  const std::pair<const char*, int32_t*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos},         {"tokenizer.ggml.eos_token_id", &eos},
      {"tokenizer.ggml.eot_token_id", &eot},         {"tokenizer.ggml.eom_token_id", &eom},
      {"tokenizer.ggml.unknown_token_id", &unk},     {"tokenizer.ggml.seperator_token_id", &sep},
      {"tokenizer.ggml.padding_token_id", &pad},     {"tokenizer.ggml.mask_token_id", &mask},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &fim_sep},
      {"tokenizer.ggml.prefix_token_id", &fim_pre},  {"tokenizer.ggml.suffix_token_id", &fim_suf},
      {"tokenizer.ggml.middle_token_id", &fim_mid},
  };
  for (const auto& [key, id] : keys) {
    if (!f.has(key)) continue;
    const int64_t v = f.get_int_or(key, -1);
    if (v >= 0 && v < n_vocab) *id = static_cast<int32_t>(v);
  }
  vocab.unk = unk;
  add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", add_bos);
  add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", add_eos);

  detect_special_tokens();

  // Cut-out order: longest text first. llama.cpp sorts with std::sort, whose order among equal lengths
  // depends on the input order; sorting the same input (ascending ids) with the same comparator reproduces
  // it.
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (vocab.attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_tokens.push_back(id);
  }
  std::sort(special_tokens.begin(), special_tokens.end(),
            [&](int32_t a, int32_t b) { return vocab.text[a].size() > vocab.text[b].size(); });

  build_trie();

  pieces.resize(n);
  for (int32_t id = 0; id < n_vocab; ++id) pieces[id] = make_piece(id);

  // Per-model strip attributes llama.cpp sets after building its caches (they only affect partitioning).
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string general_name = lower(f.get_string_opt("general.name").value_or(""));
  const std::string arch = f.get_string_opt("general.architecture").value_or("");
  auto set_attr = [&](std::string_view text, uint32_t bit, bool on) {
    const int32_t id = vocab.find(text);
    if (id < 0) return;
    vocab.attr[id] = on ? (vocab.attr[id] | bit) : (vocab.attr[id] & ~bit);
  };
  if (pre_key.find("jina-v2-de") != std::string::npos || pre_key.find("jina-v2-es") != std::string::npos ||
      pre_key.find("jina-v2-code") != std::string::npos || arch.find("nomic-bert-moe") != std::string::npos ||
      arch.find("jina-bert-v3") != std::string::npos) {
    set_attr("<mask>", kAttrLstrip, true);
  } else if (general_name.find("phi-3") != std::string::npos ||
             general_name.find("phi3") != std::string::npos) {
    // Phi-3's chat template puts a newline after every special token; the model never saw it.
    for (int32_t id : special_tokens) vocab.attr[id] |= kAttrRstrip;
    set_attr("</s>", kAttrRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, kAttrRstrip, false);
  } else if (general_name.find("modern-bert") != std::string::npos) {
    set_attr("[MASK]", kAttrLstrip, true);
  }
}

void Tokenizer::Impl::build_trie() {
  trie_special.assign(1, -1);
  for (size_t i = 0; i < special_tokens.size(); ++i) {
    int32_t node = 0;
    for (unsigned char c : vocab.text[special_tokens[i]]) {
      auto [it, inserted] = trie_next.try_emplace((uint64_t(node) << 8) | c, int32_t(trie_special.size()));
      if (inserted) trie_special.push_back(-1);
      node = it->second;
    }
    trie_special[node] = static_cast<int32_t>(i);
  }
}

// Special tokens named by text rather than metadata, and the end-of-generation set (llama.cpp's lists).
void Tokenizer::Impl::detect_special_tokens() {
  auto make_control = [&](int32_t id) { vocab.attr[id] |= kAttrControl; };
  auto first_of = [&](int32_t& slot, std::initializer_list<std::string_view> names) {
    if (slot >= 0) return;
    // llama.cpp takes the first hit in hash-map order; with several candidates present we take the lowest id.
    int32_t best = -1;
    for (std::string_view name : names) {
      const int32_t id = vocab.find(name);
      if (id >= 0 && (best < 0 || id < best)) best = id;
    }
    if (best >= 0) {
      slot = best;
      make_control(best);
    }
  };
  first_of(eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                 "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"});
  first_of(eom, {"<|eom_id|>"});
  first_of(fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
                     "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"});
  first_of(fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
                     "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"});
  first_of(fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
                     "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"});
  first_of(fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  first_of(fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  first_of(fim_sep, {"<|file_sep|>"});

  // Control tokens whose text says "unused" are unused.
  for (int32_t id = 0; id < vocab.n(); ++id) {
    if ((vocab.attr[id] & kAttrControl) && vocab.text[id].find("unused") != std::string::npos) {
      vocab.attr[id] |= kAttrUnused;
    }
  }

  std::vector<int32_t> set;
  for (int32_t id : {fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) set.push_back(id);
  }
  for (std::string_view name : {"<|eot_id|>",
                                "<|im_end|>",
                                "<|end|>",
                                "<|return|>",
                                "<|call|>",
                                "<|flush|>",
                                "<|calls|>",
                                "<end_of_turn>",
                                "<|endoftext|>",
                                "</s>",
                                "<|eom_id|>",
                                "<EOT>",
                                "_<EOT>",
                                "[EOT]",
                                "[EOS]",
                                "<|end_of_text|>",
                                "<end_of_utterance>",
                                "<eos>",
                                "<turn|>",
                                "<|tool_response>",
                                "<｜end▁of▁sentence｜>",
                                "[e~["}) {
    const int32_t id = vocab.find(name);
    if (id >= 0) {
      set.push_back(id);
      make_control(id);
    }
  }
  // gpt-oss style chat markers are rendered text, not control tokens.
  for (std::string_view name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = vocab.find(name);
    if (id >= 0) vocab.attr[id] = kAttrUserDefined;
  }
  for (int32_t id : {eos, eot, eom}) {
    if (id >= 0) set.push_back(id);
  }
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());

  auto has = [&](std::string_view name) {
    const int32_t id = vocab.find(name);
    return id >= 0 && std::binary_search(set.begin(), set.end(), id);
  };
  auto drop = [&](std::string_view name, uint32_t new_attr) {
    const int32_t id = vocab.find(name);
    set.erase(std::remove(set.begin(), set.end(), id), set.end());
    vocab.attr[id] = new_attr;
  };
  // Harmony / Solar-Open: "<|end|>" ends a message, not the generation, when the real terminators exist.
  if (has("<|end|>") && ((has("<|return|>") && (has("<|call|>") || has("<|calls|>"))) ||
                         ((has("<|call|>") || has("<|calls|>")) && has("<|flush|>")))) {
    drop("<|end|>", kAttrUserDefined);
  }
  // Gemma 4 / PLaMo: "</s>" is an ordinary token there.
  if (has("</s>") && (has("<|tool_response>") || has("<|plamo:eos|>"))) drop("</s>", kAttrNormal);
  eog = std::move(set);
}

std::string Tokenizer::Impl::make_piece(int32_t id) const {
  const uint32_t a = vocab.attr[id];
  const std::string& text = vocab.text[id];
  if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (a & kAttrNormal) {
    if (model == Model::kSpm) {
      std::string s = text;
      replace_all(s, kSpmSpace, " ");
      return s;
    }
    // BPE: map GPT-2's byte alphabet back to bytes; a character outside it is reported as llama.cpp does.
    std::string out;
    for (uint32_t cp : unicode::decode_utf8(text)) {
      const int b = unicode::codepoint_to_byte(cp);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
        continue;
      }
      std::string utf8;
      unicode::append_utf8(utf8, cp);
      out += "[UNK_BYTE_0x";
      for (unsigned char c : utf8) out += fmt::format("{:02x}", c);
      out += text + "]";
    }
    return out;
  }
  if (a & kAttrByte) {
    // "<0xAB>"
    if (text.size() >= 6) {
      const std::string hex = text.substr(3, 2);
      return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
    }
    return {};
  }
  return {};  // undefined / unused types render as nothing
}

// Cuts special-token texts out of `text`, longest first, each at every non-overlapping occurrence in the raw
// fragments that remain. User-defined tokens always; control and unknown tokens only with parse_special.
std::vector<Fragment> Tokenizer::Impl::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});

  // Which special tokens occur anywhere in the text (as indices into special_tokens, so in cut-out order). A
  // token absent from the whole text cannot occur in a fragment of it, so only these need searching below.
  std::vector<int32_t> occurring;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    int32_t node = 0;
    for (size_t j = pos; j < text.size(); ++j) {
      auto it = trie_next.find((uint64_t(node) << 8) | static_cast<unsigned char>(text[j]));
      if (it == trie_next.end()) break;
      node = it->second;
      if (trie_special[node] >= 0) occurring.push_back(trie_special[node]);
    }
  }
  std::sort(occurring.begin(), occurring.end());
  occurring.erase(std::unique(occurring.begin(), occurring.end()), occurring.end());

  std::vector<Fragment> next;
  for (int32_t index : occurring) {
    const int32_t id = special_tokens[index];
    const uint32_t a = vocab.attr[id];
    if (!parse_special && (a & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tt = vocab.text[id];

    bool changed = false;
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t off = fr.off;
      size_t len = fr.len;
      while (true) {
        const size_t hit = text.substr(0, off + len).find(tt, off);
        if (hit == std::string_view::npos) {
          if (len > 0) next.push_back({-1, off, len});
          break;
        }
        changed = true;
        size_t left_len = hit - off;
        if (a & kAttrLstrip) {
          while (left_len > 0 && ascii_space(text[off + left_len - 1])) --left_len;
        }
        if (left_len > 0) next.push_back({-1, off, left_len});
        next.push_back({id, hit, tt.size()});
        size_t r_off = hit + tt.size();
        size_t r_len = off + len - r_off;
        if (a & kAttrRstrip) {
          while (r_len > 0 && ascii_space(text[r_off])) {
            ++r_off;
            --r_len;
          }
        }
        off = r_off;
        len = r_len;
      }
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  auto impl = std::make_unique<Impl>();
  impl->load(f);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  const std::vector<Fragment> frags = m.partition(text, parse_special);

  if (add_special && ((m.add_bos && m.bos < 0) || (m.add_eos && m.eos < 0))) {
    fail("tokenizer metadata asks to add BOS/EOS but the token is missing (bos {}, eos {})", m.bos, m.eos);
  }
  if (add_special && m.add_bos) out.push_back(m.bos);
  if (m.model == Model::kSpm) {
    // A space is prefixed to the first raw fragment and to every raw fragment that follows a special token.
    bool prev_special = true;
    std::string buf;
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        out.push_back(fr.token);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (m.add_space_prefix && prev_special) buf = ' ';
      buf.append(text.substr(fr.off, fr.len));
      replace_all(buf, " ", kSpmSpace);
      spm_tokenize(m.vocab, buf, out);
      prev_special = false;
    }
  } else {
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        out.push_back(fr.token);
        continue;
      }
      for (const std::string& word : pre_tokenize(m.pre.kind, text.substr(fr.off, fr.len))) {
        bpe_tokenize_word(m.vocab, m.ranks, word, m.pre.ignore_merges, out);
      }
    }
  }
  if (add_special && m.add_eos) out.push_back(m.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= m.vocab.n()) return {};
  if (!render_special && (m.vocab.attr[id] & (kAttrUnknown | kAttrControl))) return {};
  return m.pieces[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  const Impl& m = *impl_;
  std::string text;
  bool strip_space = m.add_space_prefix;  // the space the encoder put before the first fragment
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    text += piece;
  }
  if (!m.clean_spaces || text.empty()) return text;

  // clean_up_tokenization_spaces, as three passes: " ?" " !" " ." " ," lose the space; a lone "'" between
  // spaces loses both spaces; " 's" " 'm" " 're" " 've" lose the space.
  auto pass = [](const std::string& in, auto&& step) {
    std::string out;
    out.reserve(in.size());
    out.push_back(in[0]);
    for (size_t i = 1; i < in.size(); ++i) step(in, i, out);
    return out;
  };
  text = pass(text, [](const std::string& in, size_t i, std::string& out) {
    const char x = in[i];
    if (in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) out.pop_back();
    out.push_back(x);
  });
  {
    const std::string in = std::move(text);
    std::string out;
    out.push_back(in[0]);
    char prev = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      const char x = in[i];
      if (x == '\'' && i + 1 < in.size() && prev == ' ' && in[i + 1] == ' ') {
        out.pop_back();  // the space before
        out.push_back(x);
        ++i;          // and the space after;
        prev = '\0';  // llama.cpp blanks that space in place, so the next character sees no space before it
        continue;
      }
      out.push_back(x);
      prev = x;
    }
    text = std::move(out);
  }
  text = pass(text, [](const std::string& in, size_t i, std::string& out) {
    const char x = in[i];
    if (in[i - 1] == ' ' && x == '\'' && i + 1 < in.size()) {
      const char x1 = in[i + 1];
      const bool s_or_m = x1 == 's' || x1 == 'm';
      const bool re_or_ve = i + 2 < in.size() && (x1 == 'r' || x1 == 'v') && in[i + 2] == 'e';
      if (s_or_m || re_or_ve) out.pop_back();
    }
    out.push_back(x);
  });
  return text;
}

int32_t Tokenizer::n_vocab() const {
  return impl_->vocab.n();
}
int32_t Tokenizer::bos() const {
  return impl_->bos;
}
int32_t Tokenizer::eos() const {
  return impl_->eos;
}
int32_t Tokenizer::eot() const {
  return impl_->eot;
}
int32_t Tokenizer::unk() const {
  return impl_->unk;
}
int32_t Tokenizer::pad() const {
  return impl_->pad;
}
bool Tokenizer::add_bos() const {
  return impl_->add_bos;
}
bool Tokenizer::add_eos() const {
  return impl_->add_eos;
}
bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
const std::vector<int32_t>& Tokenizer::eog_ids() const {
  return impl_->eog;
}
int32_t Tokenizer::find_token(std::string_view text) const {
  return impl_->vocab.find(text);
}
std::string_view Tokenizer::token_text(int32_t id) const {
  return id >= 0 && id < n_vocab() ? std::string_view(impl_->vocab.text[id]) : std::string_view();
}
uint32_t Tokenizer::token_attr(int32_t id) const {
  return id >= 0 && id < n_vocab() ? impl_->vocab.attr[id] : 0;
}
float Tokenizer::token_score(int32_t id) const {
  return id >= 0 && id < n_vocab() ? impl_->vocab.score[id] : 0.0f;
}
std::string_view Tokenizer::model_name() const {
  return impl_->model_name;
}
std::string_view Tokenizer::pre_name() const {
  return impl_->pre_name;
}

}  // namespace tilellm
