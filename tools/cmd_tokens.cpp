// `tilellm tokenize` prints the token ids (and pieces) of a text; `tilellm dump-logits` runs a token sequence
// and writes the logits of every position as a float32 .npy file [n_tokens][n_vocab], to compare against a
// reference.
#include <cstdio>
#include <fstream>

#include "base/error.h"
#include "commands.h"
#include "common.h"

namespace tilellm::cli {
namespace {

struct TokenizeArgs {
  ModelArgs model;
  std::string prompt;
  bool no_bos = false;
  bool special = false;
  bool ids_only = false;
};

void tokenize(const TokenizeArgs& a) {
  auto model = load_model(a.model);
  const Tokenizer& tok = model->tokenizer();
  const auto ids = tok.encode(a.prompt, !a.no_bos, a.special);
  if (a.ids_only) {
    std::printf("[");
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]\n");
    return;
  }
  for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, tok.token_to_piece(id, true).c_str());
}

struct DumpArgs {
  ModelArgs model;
  std::string tokens;
  std::string prompt;
  std::string out;
};

void write_npy(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  // NPY v1.0: magic, version, little-endian header length, a Python dict literal padded with spaces to a
  // multiple of 64 bytes (ending in '\n'), then the raw C-order data.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open for writing", path);
  const uint16_t hl = uint16_t(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&hl), 2);
  f.write(header.data(), std::streamsize(header.size()));
  f.write(reinterpret_cast<const char*>(data), std::streamsize(size_t(rows * cols) * sizeof(float)));
  if (!f) fail("{}: write failed", path);
}

void dump_logits(const DumpArgs& a) {
  auto model = load_model(a.model);
  std::vector<int32_t> ids;
  if (!a.tokens.empty()) {
    ids = parse_ids(a.tokens);
  } else {
    ids = model->tokenizer().encode(a.prompt, true, false);
  }
  SessionOptions so = session_options(a.model);
  so.logits_all = true;
  if (so.n_ctx == 0) so.n_ctx = std::max<int64_t>(int64_t(ids.size()), 16);
  Session session(*model, so);
  session.eval(ids.data(), int64_t(ids.size()));
  const int64_t V = model->config().n_vocab;
  std::vector<float> all(size_t(int64_t(ids.size()) * V));
  for (size_t i = 0; i < ids.size(); ++i) {
    std::copy(session.logits_at(int64_t(i)), session.logits_at(int64_t(i)) + V,
              all.begin() + long(i * size_t(V)));
  }
  write_npy(a.out, all.data(), int64_t(ids.size()), V);
  std::fprintf(stderr, "wrote %s: [%zu, %lld] float32\n", a.out.c_str(), ids.size(), (long long)V);
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand("tokenize", "print the tokens of a text");
  add_model_args(sub, a->model);
  sub->add_option("-p,--prompt", a->prompt, "text")->required();
  sub->add_flag("--no-bos", a->no_bos, "do not add BOS/EOS even where the model wants them");
  sub->add_flag("--special", a->special, "parse special-token texts such as <|im_start|>");
  sub->add_flag("--ids", a->ids_only, "print only the ids, as a list");
  sub->callback([a] { tokenize(*a); });
}

void register_dump_logits(CLI::App& app) {
  auto a = std::make_shared<DumpArgs>();
  CLI::App* sub = app.add_subcommand("dump-logits", "write the logits of every position to a .npy file");
  add_model_args(sub, a->model);
  auto* t = sub->add_option("--tokens", a->tokens, "comma-separated token ids");
  auto* p = sub->add_option("-p,--prompt", a->prompt, "text (tokenized with BOS where the model wants it)");
  t->excludes(p);
  sub->add_option("-o,--out", a->out, "output .npy file")->required();
  sub->callback([a] {
    if (a->tokens.empty() && a->prompt.empty()) fail("dump-logits needs --tokens or --prompt");
    dump_logits(*a);
  });
}

}  // namespace tilellm::cli
