// Chat template tests. The goldens in tests/data/chat/*.json are jinja2 renderings of each family's reference
// template (tests/reference/make_chat_goldens.py), so every case compares both renderers — the model's own
// template through the interpreter, and the built-in format — with the real template as Hugging Face renders
// it, errors included. (The interpreter's own tests, tool conversations included: test_jinja.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../common/paths.h"
#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tilellm {
namespace {

nlohmann::json load_golden(const std::string& name) {
  const std::string path = test::source_path("tests/data/chat/" + name + ".json");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing golden " + path + ": run tests/reference/make_chat_goldens.py");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

std::vector<ChatMessage> messages_of(const nlohmann::json& c) {
  std::vector<ChatMessage> msgs;
  for (const auto& m : c["messages"])
    msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return msgs;
}

// A case the CLI's messages can express: roles and string contents, no tools.
bool plain(const nlohmann::json& c) {
  if (c.contains("extra")) return false;
  for (const auto& m : c["messages"]) {
    if (!m["content"].is_string() || m.contains("tool_calls")) return false;
  }
  return true;
}

// Detects the family from the golden's own template text and renders every plain case through the model's
// template (the interpreter) and through the built-in format.
void check_family(const std::string& name) {
  const nlohmann::json g = load_golden(name);
  const std::string tpl = g["template"].get<std::string>();
  const ChatTemplate own =
      chat_template_from_gguf(tpl, g["arch"].get<std::string>(), g["bos_token"].get<std::string>(),
                              g["eos_token"].get<std::string>());
  ASSERT_TRUE(own.jinja) << name << ": " << own.unsupported;
  ASSERT_EQ(chat_format_name(own.format), [&] {
    std::string f = g["format"].get<std::string>();
    for (auto& ch : f) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return f;
  }()) << name;
  ChatTemplate builtin = own;
  builtin.jinja.reset();
  size_t n = 0;
  for (const ChatTemplate* t : {&own, static_cast<const ChatTemplate*>(&builtin)}) {
    for (const auto& c : g["cases"]) {
      if (!plain(c)) continue;
      SCOPED_TRACE(name + (t->jinja ? " (own template) / " : " (built-in) / ") +
                   c["name"].get<std::string>());
      ++n;
      const auto msgs = messages_of(c);
      const bool gen = c["add_generation_prompt"].get<bool>();
      if (c.contains("error")) {
        EXPECT_THROW(apply_chat_template(*t, msgs, gen), Error) << "jinja raised: " << c["error"];
      } else {
        std::string warning;
        EXPECT_EQ(apply_chat_template(*t, msgs, gen, &warning), c["expected"].get<std::string>());
        EXPECT_EQ(warning, "");
      }
    }
  }
  EXPECT_GE(n, 40u);
}

TEST(ChatTemplate, smollm2_matches_jinja_renderings) {
  check_family("smollm2");
}
TEST(ChatTemplate, gemma3_matches_jinja_renderings) {
  check_family("gemma3");
}
TEST(ChatTemplate, llama3_matches_jinja_renderings) {
  check_family("llama3");
}
TEST(ChatTemplate, llama2_matches_jinja_renderings) {
  check_family("llama2");
}
TEST(ChatTemplate, phi3_matches_jinja_renderings) {
  check_family("phi3");
}

TEST(ChatTemplate, smollm2_default_system_is_read_from_the_template) {
  const auto g = load_golden("smollm2");
  const ChatTemplate t = chat_template_from_gguf(g["template"].get<std::string>(), "llama");
  EXPECT_EQ(t.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  // The default belongs to SmolLM2's template, not to ChatML: the bare format has none.
  EXPECT_EQ(apply_chat_template(ChatFormat::ChatML, {{"user", "hi"}}, true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, default_system_parsing_accepts_escaped_literals_and_rejects_assembled_turns) {
  // Qwen2.5-style: the JSON-escaped form keeps "\n" as a Jinja escape inside the literal.
  const std::string qwen =
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You "
      "are a "
      "helpful assistant.<|im_end|>\\n' }}{%- endif %}";
  EXPECT_EQ(chat_template_from_gguf(qwen, "qwen2").default_system,
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // Double-quoted literal with an escaped quote inside.
  const std::string dq = "{{ \"<|im_start|>system\\nSay \\\"hi\\\".<|im_end|>\\n\" }}";
  EXPECT_EQ(chat_template_from_gguf(dq, "llama").default_system, "Say \"hi\".");
  // A system turn assembled from the message content is not a default.
  const std::string plain =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% "
      "endif %}";
  EXPECT_EQ(chat_template_from_gguf(plain, "llama").default_system, "");
  const std::string assembled = "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}";
  EXPECT_EQ(chat_template_from_gguf(assembled, "llama").default_system, "");
}

TEST(ChatTemplate, detection_by_markers_then_by_architecture) {
  const std::optional<std::string> none;
  EXPECT_EQ(detect_chat_format(none, "gemma3"), ChatFormat::Gemma);
  EXPECT_EQ(detect_chat_format(none, "gemma2"), ChatFormat::Gemma);
  EXPECT_EQ(detect_chat_format(none, "llama"), ChatFormat::ChatML);
  EXPECT_EQ(detect_chat_format(none, "qwen2"), ChatFormat::ChatML);
  EXPECT_EQ(detect_chat_format(none, "phi3"), ChatFormat::Phi3);
  EXPECT_EQ(detect_chat_format(std::string(), "gemma3"), ChatFormat::Gemma);  // empty = absent
  EXPECT_EQ(detect_chat_format(std::string("x <|im_start|> y"), "gemma3"),
            ChatFormat::ChatML);  // template wins
  EXPECT_EQ(detect_chat_format(std::string("{{ '<start_of_turn>' }}"), "llama"), ChatFormat::Gemma);
  EXPECT_EQ(detect_chat_format(std::string("<|start_header_id|>x<|end_header_id|>"), "llama"),
            ChatFormat::Llama3);
  EXPECT_EQ(detect_chat_format(std::string("bos_token + '[INST] '"), "llama"), ChatFormat::Llama2);
  EXPECT_EQ(detect_chat_format(std::string("'<|user|>\\n' + c + '<|end|>\\n'"), "llama"), ChatFormat::Phi3);
  // Zephyr-style (no <|end|>) is not a supported family: the architecture decides.
  EXPECT_EQ(detect_chat_format(std::string("'<|user|>\\n' + c + eos_token"), "llama"), ChatFormat::ChatML);
  // The Gemma template has no default system message to parse.
  EXPECT_EQ(
      chat_template_from_gguf(load_golden("gemma3")["template"].get<std::string>(), "gemma3").default_system,
      "");
}

TEST(ChatTemplate, names_and_stop_strings) {
  for (ChatFormat f :
       {ChatFormat::ChatML, ChatFormat::Gemma, ChatFormat::Llama2, ChatFormat::Llama3, ChatFormat::Phi3}) {
    EXPECT_EQ(chat_format_from_name(chat_format_name(f)), f);
    EXPECT_FALSE(chat_stop_strings(f).empty());
  }
  EXPECT_EQ(chat_format_from_name("vicuna"), std::nullopt);
  EXPECT_EQ(chat_stop_strings(ChatFormat::ChatML), std::vector<std::string>{"<|im_end|>"});
  EXPECT_EQ(chat_stop_strings(ChatFormat::Gemma), std::vector<std::string>{"<end_of_turn>"});
  EXPECT_EQ(chat_stop_strings(ChatFormat::Llama3), std::vector<std::string>{"<|eot_id|>"});
}

TEST(ChatTemplate, python_strip_matches_str_strip) {
  EXPECT_EQ(python_strip(""), "");
  EXPECT_EQ(python_strip(" \t\n\r\v\f"), "");
  EXPECT_EQ(python_strip("  a b  "), "a b");
  EXPECT_EQ(python_strip("\xc2\xa0x\xe3\x80\x80"), "x");          // U+00A0, U+3000
  EXPECT_EQ(python_strip("\xe2\x80\xa8x\x1c\x1f\xc2\x85"), "x");  // U+2028, U+001C, U+001F, U+0085
  EXPECT_EQ(python_strip("\xe2\x80\x8bx\xe2\x80\x8b"),
            "\xe2\x80\x8bx\xe2\x80\x8b");                             // U+200B is not whitespace
  EXPECT_EQ(python_strip("\xff x \xff"), "\xff x \xff");              // invalid UTF-8 stops the scan
  EXPECT_EQ(python_strip(" \xf0\x9f\x91\x8b "), "\xf0\x9f\x91\x8b");  // 4-byte code point kept whole
}

TEST(ChatTemplate, errors_name_the_template_and_the_message) {
  try {
    apply_chat_template(ChatFormat::Gemma, {{"user", "a"}, {"user", "b"}}, true);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("gemma"), std::string::npos) << w;
    EXPECT_NE(w.find("message 1"), std::string::npos) << w;
  }
  EXPECT_THROW(apply_chat_template(ChatFormat::Llama2, {}, true), Error);
}

// The real models: the SmolLM2 GGUF's template is the golden's, and with each model's tokenizer the rendered
// conversation's turn markers and stop strings are single special tokens (so parse_special reaches them).
TEST(ChatTemplate, real_models_template_and_special_tokens) {
  struct M {
    const char* file;
    const char* golden;
    const char* open_marker;
  };
  for (const M& m :
       {M{test::kSmolLM2, "smollm2", "<|im_start|>"}, M{test::kGemma3, "gemma3", "<start_of_turn>"}}) {
    SCOPED_TRACE(m.file);
    const std::string path = test::model_path(m.file);
    ASSERT_MODEL(path);
    auto gguf = GgufFile::open(path);
    const auto jinja = gguf->get_string_opt("tokenizer.chat_template");
    const std::string arch = gguf->get_string("general.architecture");
    const nlohmann::json g = load_golden(m.golden);
    if (jinja) {
      EXPECT_EQ(*jinja, g["template"].get<std::string>())
          << "the model's template changed: regenerate the goldens";
    }
    const ChatTemplate t = chat_template_from_gguf(jinja, arch);
    EXPECT_EQ(chat_format_name(t.format), std::string(m.golden) == "smollm2" ? "chatml" : "gemma");

    auto tok = Tokenizer::from_gguf(*gguf);
    const auto marker = tok->encode(m.open_marker, false, true);
    ASSERT_EQ(marker.size(), 1u) << m.open_marker << " is not one special token";
    for (const std::string& s : chat_stop_strings(t.format)) {
      EXPECT_EQ(tok->encode(s, false, true).size(), 1u) << "stop string " << s << " is not one token";
    }
    const std::string text = apply_chat_template(
        t, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}, true);
    const auto ids = tok->encode(text, true, true);
    const size_t turns = static_cast<size_t>(std::count(ids.begin(), ids.end(), marker[0]));
    // ChatML keeps the system turn (4 turns + generation prompt); Gemma folds it into the first user turn.
    EXPECT_EQ(turns, std::string(m.golden) == "smollm2" ? 5u : 4u);
  }
}

}  // namespace
}  // namespace tilellm
