// Chat template detection and rendering; the contract is in chat_template.h. The model's own template goes to
// the interpreter (jinja.h); each render_* function is a built-in format mirroring one reference Jinja
// template statement by statement, so a reader can check them side by side with
// tests/data/chat/<family>.json's "template".
#include "tokenizer/chat_template.h"

#include <cstdint>

#include "base/error.h"
#include "tokenizer/jinja.h"
#include "tokenizer/jinja_text.h"

namespace tilellm {

namespace {

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// Gemma's and Llama 2's templates index messages[0] and raise_exception on role order; both are errors the
// user can fix, so they are reported with the template's own wording and the offending position.
void check_alternation(std::string_view family, const std::vector<ChatMessage>& msgs, size_t start) {
  if (msgs.empty()) fail("chat template ({}): the conversation is empty", family);
  for (size_t j = 0; start + j < msgs.size(); ++j) {
    const ChatMessage& m = msgs[start + j];
    if ((m.role == "user") != (j % 2 == 0)) {
      fail(
          "chat template ({}): conversation roles must alternate user/assistant/user/assistant/... "
          "(message {} has role '{}')",
          family, start + j, m.role);
    }
  }
}

// ChatML as SmolLM2's template writes it:
//   {% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}<default system turn>
//   {% endif %}<|im_start|>{{role}}\n{{content}}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}...
std::string render_chatml(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (i == 0 && !t.default_system.empty() && msgs[0].role != "system") {
      out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
    }
    out += "<|im_start|>" + msgs[i].role + "\n" + msgs[i].content + "<|im_end|>\n";
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

// Gemma 3: a leading system message becomes `content + "\n\n"` in front of the first turn (untrimmed; the
// turn's own content is trimmed); "assistant" is called "model"; every other role name is kept.
std::string render_gemma(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string prefix;
  size_t start = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    prefix = msgs[0].content + "\n\n";
    start = 1;
  }
  check_alternation("gemma", msgs, start);
  std::string out;
  for (size_t j = 0; start + j < msgs.size(); ++j) {
    const ChatMessage& m = msgs[start + j];
    out += "<start_of_turn>";
    out += m.role == "assistant" ? std::string_view("model") : std::string_view(m.role);
    out += "\n";
    if (j == 0) out += prefix;
    out += python_strip(m.content);
    out += "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

// Llama 2 chat: every user turn is `bos + "[INST] " + strip(content) + " [/INST]"` (the first turn's content
// prefixed by the <<SYS>> block before stripping), every assistant turn `" " + strip(content) + " " + eos`.
// Other roles at assistant positions pass the alternation check and render nothing, as in the template.
std::string render_llama2(const std::vector<ChatMessage>& msgs) {
  std::string system;
  bool has_system = false;
  size_t start = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    system = msgs[0].content;
    has_system = true;
    start = 1;
  }
  check_alternation("llama2", msgs, start);
  std::string out;
  for (size_t j = 0; start + j < msgs.size(); ++j) {
    const ChatMessage& m = msgs[start + j];
    std::string content =
        (j == 0 && has_system) ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + m.content : m.content;
    if (m.role == "user") {
      if (j > 0)
        out += "<s>";  // the first BOS is the tokenizer's; later ones are part of the conversation text
      out += "[INST] ";
      out += python_strip(content);
      out += " [/INST]";
    } else if (m.role == "assistant") {
      out += " ";
      out += python_strip(content);
      out += " </s>";
    }
  }
  return out;
}

// Llama 3: one header + trimmed content + <|eot_id|> per message, any role.
std::string render_llama3(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  for (const ChatMessage& m : msgs) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += python_strip(m.content);
    out += "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Phi-3.5: system (only when non-empty), user and assistant turns; other roles are dropped. Without a
// generation prompt the template closes the conversation with eos_token.
std::string render_phi3(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  for (const ChatMessage& m : msgs) {
    if ((m.role == "system" && !m.content.empty()) || m.role == "user" || m.role == "assistant") {
      out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    }
  }
  out += gen ? "<|assistant|>\n" : "<|endoftext|>";
  return out;
}

ChatFormat format_from_arch(std::string_view arch) {
  if (arch.starts_with("gemma")) return ChatFormat::Gemma;
  if (arch == "phi3") return ChatFormat::Phi3;
  return ChatFormat::ChatML;
}

// Decodes the escapes Jinja accepts in string literals (the Python ones that occur in templates); an unknown
// escape keeps its backslash, as Python does.
std::string unescape_jinja(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
      case '\'':
      case '"':
        out += c;
        break;
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

// SmolLM2-style default system turn: a Jinja string literal that opens with "<|im_start|>system" + newline (a
// real newline or the escape \n) and contains "<|im_end|>" before its closing quote. Anything else — notably
// '<|im_start|>system\n' + messages[0]['content'], whose literal closes right after the newline — is not a
// default.
std::string chatml_default_system(std::string_view tpl) {
  static constexpr std::string_view kOpen = "<|im_start|>system";
  static constexpr std::string_view kClose = "<|im_end|>";
  for (size_t pos = tpl.find(kOpen); pos != std::string_view::npos; pos = tpl.find(kOpen, pos + 1)) {
    if (pos == 0 || (tpl[pos - 1] != '\'' && tpl[pos - 1] != '"')) continue;
    const char quote = tpl[pos - 1];
    size_t body = pos + kOpen.size();
    if (tpl.substr(body, 1) == "\n") {
      body += 1;
    } else if (tpl.substr(body, 2) == "\\n") {
      body += 2;
    } else {
      continue;
    }
    // The literal's end: the first unescaped closing quote.
    size_t end = body;
    while (end < tpl.size() && tpl[end] != quote) end += tpl[end] == '\\' ? 2 : 1;
    if (end >= tpl.size()) continue;
    const std::string_view literal = tpl.substr(body, end - body);
    const size_t close = literal.find(kClose);
    if (close == std::string_view::npos || close == 0) continue;
    return unescape_jinja(literal.substr(0, close));
  }
  return {};
}

}  // namespace

std::string_view python_strip(std::string_view s) {
  return jinja::py_strip(s);
}

ChatFormat detect_chat_format(const std::optional<std::string>& jinja_template, std::string_view arch) {
  if (jinja_template && !jinja_template->empty()) {
    const std::string_view t = *jinja_template;
    if (contains(t, "<|im_start|>")) return ChatFormat::ChatML;
    if (contains(t, "[INST]")) return ChatFormat::Llama2;
    if (contains(t, "<|end|>") && (contains(t, "<|user|>") || contains(t, "<|assistant|>")))
      return ChatFormat::Phi3;
    if (contains(t, "<start_of_turn>")) return ChatFormat::Gemma;
    if (contains(t, "<|start_header_id|>")) return ChatFormat::Llama3;
  }
  return format_from_arch(arch);
}

std::string_view chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML:
      return "chatml";
    case ChatFormat::Gemma:
      return "gemma";
    case ChatFormat::Llama2:
      return "llama2";
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::Phi3:
      return "phi3";
  }
  return "unknown";
}

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  for (ChatFormat f :
       {ChatFormat::ChatML, ChatFormat::Gemma, ChatFormat::Llama2, ChatFormat::Llama3, ChatFormat::Phi3}) {
    if (chat_format_name(f) == name) return f;
  }
  return std::nullopt;
}

ChatTemplate chat_template_from_gguf(const std::optional<std::string>& jinja_template, std::string_view arch,
                                     const std::string& bos_token, const std::string& eos_token) {
  ChatTemplate t;
  t.format = detect_chat_format(jinja_template, arch);
  if (t.format == ChatFormat::ChatML && jinja_template)
    t.default_system = chatml_default_system(*jinja_template);
  t.bos_token = bos_token;
  t.eos_token = eos_token;
  if (jinja_template && !jinja_template->empty()) {
    try {
      t.jinja = std::make_shared<const jinja::Template>(*jinja_template);
      t.emits_bos = contains(*jinja_template, "bos_token");
    } catch (const jinja::Unsupported& e) {
      t.unsupported = e.construct();
    } catch (const jinja::TemplateError& e) {
      t.unsupported = std::string("a syntax error (") + e.what() + ")";
    }
  }
  return t;
}

namespace {

// The model's own template: the variables Hugging Face's apply_chat_template passes.
std::string render_own(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, bool gen) {
  jinja::Array messages;
  for (const ChatMessage& m : msgs) {
    messages.emplace_back(
        jinja::Object{{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}});
  }
  const jinja::Value ctx(jinja::Object{{"messages", jinja::Value(std::move(messages))},
                                       {"tools", jinja::Value::none()},
                                       {"add_generation_prompt", jinja::Value(gen)},
                                       {"bos_token", jinja::Value(t.bos_token)},
                                       {"eos_token", jinja::Value(t.eos_token)}});
  std::string text = t.jinja->render(ctx);
  if (t.emits_bos && !t.bos_token.empty() && text.starts_with(t.bos_token)) text.erase(0, t.bos_token.size());
  return text;
}

}  // namespace

std::string apply_chat_template(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt, std::string* warning) {
  if (t.jinja) {
    try {
      return render_own(t, msgs, add_generation_prompt);
    } catch (const jinja::Unsupported& e) {
      if (warning) {
        *warning = "the model's chat template uses " + e.construct() +
                   ", which this engine's template interpreter does not implement; using the built-in " +
                   std::string(chat_format_name(t.format)) + " format instead";
      }
    } catch (const jinja::TemplateError& e) {
      fail("chat template: {}", e.what());
    }
  }
  switch (t.format) {
    case ChatFormat::ChatML:
      return render_chatml(t, msgs, add_generation_prompt);
    case ChatFormat::Gemma:
      return render_gemma(msgs, add_generation_prompt);
    case ChatFormat::Llama2:
      return render_llama2(msgs);
    case ChatFormat::Llama3:
      return render_llama3(msgs, add_generation_prompt);
    case ChatFormat::Phi3:
      return render_phi3(msgs, add_generation_prompt);
  }
  fail("chat template: unknown format {}", static_cast<int>(t.format));
}

std::string apply_chat_template(ChatFormat f, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt) {
  ChatTemplate t;
  t.format = f;
  return apply_chat_template(t, msgs, add_generation_prompt);
}

std::vector<std::string> chat_stop_strings(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML:
      return {"<|im_end|>"};
    case ChatFormat::Gemma:
      return {"<end_of_turn>"};
    case ChatFormat::Llama2:
      return {"</s>"};
    case ChatFormat::Llama3:
      return {"<|eot_id|>"};
    case ChatFormat::Phi3:
      return {"<|end|>", "<|endoftext|>"};
  }
  return {};
}

}  // namespace tilellm
