// The C API's models: load (with a progress callback), information, metadata, the tokenizer and the chat
// templates.
#include <cmath>

#include "api/api_internal.h"
#include "tokenizer/chat_template.h"

using namespace tilellm;
using namespace tilellm::api;

namespace {

// A metadata value as text: numbers in decimal, booleans true/false, strings as they are, arrays by count.
std::string value_text(const GgufValue& v) {
  switch (v.type) {
    case GgufType::UINT8:
    case GgufType::UINT16:
    case GgufType::UINT32:
    case GgufType::UINT64:
      return std::to_string(v.u);
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64:
      return std::to_string(v.i);
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      return fmt::format("{}", v.f);
    case GgufType::BOOL:
      return v.i ? "true" : "false";
    case GgufType::STRING:
      return std::string(v.str);
    case GgufType::ARRAY:
      return fmt::format("[{} items of {}]", v.count, gguf_type_name(v.elem_type));
  }
  return {};
}

const Model& model_of(const tilellm_model* m) {
  need(m, "model");
  return *m->model;
}

}  // namespace

extern "C" {

tilellm_model_params tilellm_model_default_params(void) {
  tilellm_model_params p;
  p.progress = nullptr;
  p.progress_user_data = nullptr;
  return p;
}

tilellm_status tilellm_model_load(const char* path, const tilellm_model_params* params, tilellm_model** out) {
  return guard("tilellm_model_load", TILELLM_ERR_MODEL, [&] {
    need(out, "out");
    *out = nullptr;
    need(path, "path");
    const tilellm_model_params p = params ? *params : tilellm_model_default_params();
    LoadOptions lo;
    if (p.progress) {
      lo.progress = [p](size_t done, size_t total) {
        const float f = total ? float(double(done) / double(total)) : 1.0f;
        if (!p.progress(f, p.progress_user_data))
          raise(TILELLM_ERR_CANCELLED, "the progress callback stopped the load at {:.0f}%", 100.0 * f);
      };
    }
    auto m = std::make_unique<tilellm_model>();
    m->model = Model::load(path, lo);
    m->path = path;
    *out = m.release();
  });
}

void tilellm_model_free(tilellm_model* model) {
  delete model;
}

tilellm_status tilellm_model_get_info(const tilellm_model* model, tilellm_model_info* out) {
  return guard("tilellm_model_get_info", TILELLM_ERR_INTERNAL, [&] {
    const Model& m = model_of(model);
    need(out, "out");
    const ModelConfig& c = m.config();
    out->architecture = c.arch_name.c_str();
    out->name = c.name.c_str();
    out->path = model->path.c_str();
    out->n_params = m.n_params();
    out->n_bytes = m.weight_bytes();
    out->n_vocab = int32_t(c.n_vocab);
    out->n_embd = int32_t(c.n_embd);
    out->n_layer = int32_t(c.n_layer);
    out->n_head = int32_t(c.n_head);
    out->n_head_kv = int32_t(c.n_head_kv);
    out->head_dim = int32_t(c.head_dim);
    out->n_ctx_train = int32_t(c.n_ctx_train);
  });
}

int32_t tilellm_model_meta_count(const tilellm_model* model) {
  return model ? int32_t(model->model->file().metadata().size()) : 0;
}

const char* tilellm_model_meta_key(const tilellm_model* model, int32_t i) {
  if (!model) return nullptr;
  const auto& kv = model->model->file().metadata();
  return i >= 0 && size_t(i) < kv.size() ? kv[size_t(i)].first.c_str() : nullptr;
}

tilellm_status tilellm_model_meta_value(const tilellm_model* model, const char* key, char* buf,
                                        size_t capacity, size_t* n_out) {
  return guard("tilellm_model_meta_value", TILELLM_ERR_INTERNAL, [&] {
    const Model& m = model_of(model);
    need(key, "key");
    need(n_out, "n_out");
    const GgufValue* v = m.file().find(key);
    if (!v) raise(TILELLM_ERR_INVALID_ARGUMENT, "the model has no metadata key '{}'", key);
    put_text(value_text(*v), buf, capacity, n_out);
  });
}

tilellm_status tilellm_tokenize(const tilellm_model* model, const char* text, size_t text_len,
                                bool add_special, bool parse_special, int32_t* tokens, size_t capacity,
                                size_t* n_out) {
  return guard("tilellm_tokenize", TILELLM_ERR_INTERNAL, [&] {
    const Model& m = model_of(model);
    need(n_out, "n_out");
    if (text_len > 0) need(text, "text");
    const std::vector<int32_t> ids =
        m.tokenizer().encode(std::string_view(text ? text : "", text_len), add_special, parse_special);
    *n_out = ids.size();
    if (ids.size() > capacity)
      raise(TILELLM_ERR_BUFFER_TOO_SMALL, "the text is {} tokens; the buffer holds {}", ids.size(), capacity);
    if (!ids.empty()) {
      need(tokens, "tokens");
      std::copy(ids.begin(), ids.end(), tokens);
    }
  });
}

tilellm_status tilellm_detokenize(const tilellm_model* model, const int32_t* tokens, size_t n_tokens,
                                  bool render_special, char* buf, size_t capacity, size_t* n_out) {
  return guard("tilellm_detokenize", TILELLM_ERR_INTERNAL, [&] {
    const Model& m = model_of(model);
    need(n_out, "n_out");
    if (n_tokens > 0) need(tokens, "tokens");
    const std::vector<int32_t> ids(tokens, tokens + n_tokens);
    for (int32_t t : ids) {
      if (t < 0 || t >= m.tokenizer().n_vocab())
        raise(TILELLM_ERR_INVALID_ARGUMENT, "token id {} is outside the vocabulary of {}", t,
              m.tokenizer().n_vocab());
    }
    put_text(m.tokenizer().decode(ids, render_special), buf, capacity, n_out);
  });
}

tilellm_status tilellm_token_to_piece(const tilellm_model* model, int32_t token, bool render_special,
                                      char* buf, size_t capacity, size_t* n_out) {
  return guard("tilellm_token_to_piece", TILELLM_ERR_INTERNAL, [&] {
    const Model& m = model_of(model);
    need(n_out, "n_out");
    if (token < 0 || token >= m.tokenizer().n_vocab())
      raise(TILELLM_ERR_INVALID_ARGUMENT, "token id {} is outside the vocabulary of {}", token,
            m.tokenizer().n_vocab());
    put_text(m.tokenizer().token_to_piece(token, render_special), buf, capacity, n_out);
  });
}

int32_t tilellm_token_special(const tilellm_model* model, tilellm_special_token which) {
  if (!model) return -1;
  const Tokenizer& t = model->model->tokenizer();
  switch (which) {
    case TILELLM_TOKEN_BOS:
      return t.bos();
    case TILELLM_TOKEN_EOS:
      return t.eos();
    case TILELLM_TOKEN_EOT:
      return t.eot();
    case TILELLM_TOKEN_UNK:
      return t.unk();
    case TILELLM_TOKEN_PAD:
      return t.pad();
  }
  return -1;
}

bool tilellm_token_is_eog(const tilellm_model* model, int32_t token) {
  return model && model->model->tokenizer().is_eog(token);
}

bool tilellm_token_is_control(const tilellm_model* model, int32_t token) {
  return model && (model->model->tokenizer().token_attr(token) & kAttrControl) != 0;
}

const char* tilellm_token_text(const tilellm_model* model, int32_t token) {
  if (!model) return "";
  try {
    tilellm_model* m = const_cast<tilellm_model*>(model);  // the texts are a cache made once
    std::call_once(m->texts_once, [m] {
      const Tokenizer& t = m->model->tokenizer();
      m->texts.reserve(size_t(t.n_vocab()));
      for (int32_t i = 0; i < t.n_vocab(); ++i) m->texts.emplace_back(t.token_text(i));
    });
    return token >= 0 && size_t(token) < m->texts.size() ? m->texts[size_t(token)].c_str() : "";
  } catch (...) {
    set_error("tilellm_token_text", "out of memory");
    return "";
  }
}

tilellm_status tilellm_chat_apply(const tilellm_model* model, const char* chat_template,
                                  const tilellm_chat_message* messages, size_t n_messages, bool add_assistant,
                                  char* buf, size_t capacity, size_t* n_out) {
  return guard("tilellm_chat_apply", TILELLM_ERR_INVALID_ARGUMENT, [&] {
    const Model& m = model_of(model);
    need(n_out, "n_out");
    if (n_messages > 0) need(messages, "messages");
    const Tokenizer& tok = m.tokenizer();
    auto text = [&](int32_t id) { return id >= 0 ? std::string(tok.token_text(id)) : std::string(); };
    // The model's own template (rendered by the Jinja interpreter) unless a built-in format is named.
    ChatTemplate t = chat_template_from_gguf(m.file().get_string_opt("tokenizer.chat_template"),
                                             m.config().arch_name, text(tok.bos()), text(tok.eos()));
    if (chat_template && *chat_template) {
      const std::optional<ChatFormat> f = chat_format_from_name(chat_template);
      if (!f) {
        raise(TILELLM_ERR_INVALID_ARGUMENT,
              "'{}' is not a built-in chat format (chatml, gemma, llama2, llama3, phi3)", chat_template);
      }
      if (*f != t.format) t.default_system.clear();  // that text belongs to the model's own template
      t.format = *f;
      t.jinja.reset();
    }
    std::vector<ChatMessage> msgs;
    for (size_t i = 0; i < n_messages; ++i) {
      if (!messages[i].role || !messages[i].content)
        raise(TILELLM_ERR_INVALID_ARGUMENT, "message {} has a NULL role or content", i);
      msgs.push_back({messages[i].role, messages[i].content});
    }
    put_text(apply_chat_template(t, msgs, add_assistant), buf, capacity, n_out);
  });
}

}  // extern "C"
