// Chat templates: renders a conversation into the text a chat model was trained on.
//
// GGUF files carry the Hugging Face Jinja template in `tokenizer.chat_template`. The model's own template is
// rendered by the engine's Jinja interpreter (jinja.h: byte-equal to jinja2 in Hugging Face's environment on
// the families' templates). Beside it, each family has a built-in format, recognised by marker strings in the
// template (as llama.cpp's llm_chat_detect_template does) or from the architecture: a hand-written equivalent
// of that family's reference template, including its quirks (roles that must alternate, trimmed contents, the
// system text folded into the first user turn), with literals that vary between models of one family, such as
// SmolLM2's default system message, read out of the Jinja text. The built-in format renders when the model
// has no template, when --chat-template names one, and — with a warning naming the construct — when the
// model's template uses something the interpreter does not implement. The format also gives the stop strings.
//
// Reference templates (tests/data/chat/*.json holds jinja2 renderings of each, checked by the tests):
//   ChatML  SmolLM2-135M-Instruct: "<|im_start|>role\ncontent<|im_end|>\n", plus its own default system turn.
//   Gemma   google/gemma-3-*-it: "<start_of_turn>user|model\n" + trimmed content + "<end_of_turn>\n".
//   Llama2  Llama-2-*-chat-hf: "[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] answer </s><s>[INST] ...".
//   Llama3  Meta-Llama-3-8B-Instruct: "<|start_header_id|>role<|end_header_id|>\n\n" + trimmed content
//           + "<|eot_id|>".
//   Phi3    Phi-3.5-mini-instruct: "<|role|>\ncontent<|end|>\n"; without a generation prompt the text ends
//           with "<|endoftext|>".
//
// Output contract: the text contains special-token texts ("<|im_start|>", "<start_of_turn>", Llama 2's later
// "<s>") and must be tokenized with parse_special = true. The leading BOS is never included (the tokenizer
// adds it when the model's metadata asks for it); every other token text the reference template emits is.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tilellm {

enum class ChatFormat { ChatML, Gemma, Llama2, Llama3, Phi3 };

struct ChatMessage {
  std::string role;  // system | user | assistant (ChatML and Llama 3 render any role name verbatim)
  std::string content;
};

// The format for a model: from the markers in its Jinja template when present and recognised, checked in
// llama.cpp's order: "<|im_start|>" ChatML; "[INST]" Llama2; "<|end|>" with "<|user|>" or "<|assistant|>"
// Phi3; "<start_of_turn>" Gemma; "<|start_header_id|>" Llama3. Otherwise (absent, empty or unrecognised,
// e.g. a Zephyr-style template) from the architecture name: gemma* -> Gemma, phi3 -> Phi3, else ChatML.
ChatFormat detect_chat_format(const std::optional<std::string>& jinja_template, std::string_view arch);

// llama.cpp's names: "chatml", "gemma", "llama2", "llama3", "phi3".
std::string_view chat_format_name(ChatFormat f);
// Inverse of chat_format_name (for a --chat-template override); nullopt for an unknown name.
std::optional<ChatFormat> chat_format_from_name(std::string_view name);

namespace jinja {
class Template;
}

// A model's template: its own Jinja text (when the interpreter takes it), and the built-in format plus the
// literals its template adds to it.
struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  // ChatML only: the system text the model's template inserts when the conversation does not start with a
  // system message (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging Face").
  // Empty: none.
  std::string default_system;
  // The model's own template, parsed; null when the model has none, when --chat-template overrides it, or
  // when it does not parse (then `unsupported` says why).
  std::shared_ptr<const jinja::Template> jinja;
  // The texts of the model's BOS and EOS tokens, the template's bos_token and eos_token.
  std::string bos_token, eos_token;
  // Whether the template emits bos_token (the engine's tokenizer adds BOS itself, so a leading one is
  // dropped).
  bool emits_bos = false;
  // Why the model's own template is not used: the construct the interpreter lacks, or its syntax error; empty
  // when it is used or there is none.
  std::string unsupported;
};

// The model's template as above: detect_chat_format plus the template's own literals, and the template itself
// parsed by the interpreter. The default system message is the body of a single Jinja string literal of the
// form '<|im_start|>system\n<text><|im_end|>...' (a complete system turn written into the template, as
// SmolLM2's and Qwen2.5's are); a system turn assembled from message content is not a default.
ChatTemplate chat_template_from_gguf(const std::optional<std::string>& jinja_template, std::string_view arch,
                                     const std::string& bos_token = "", const std::string& eos_token = "");

// Renders the conversation as the model was trained to see it; with add_generation_prompt, ends with the
// assistant turn opener (Llama 2's template has none: its text already ends with " [/INST]"). With the
// model's own template: the interpreter renders it with messages, add_generation_prompt, bos_token, eos_token
// and tools (none), as Hugging Face does, and a leading BOS text is dropped; where the rendering reaches a
// construct the interpreter lacks, the built-in format renders instead and *warning (when given) says so,
// naming it. Conversations the template rejects raise tilellm::Error with the template's reason
// (raise_exception's message; for the built-in Gemma and Llama 2, an empty conversation and roles that do not
// alternate user/assistant after an optional leading system message).
std::string apply_chat_template(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt, std::string* warning = nullptr);
// Same, for the bare built-in format (no model-specific default system message).
std::string apply_chat_template(ChatFormat f, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt);

// Texts that end an assistant turn in this format, for stop detection ("<|im_end|>", "<end_of_turn>", ...).
std::vector<std::string> chat_stop_strings(ChatFormat f);

// Python's str.strip() (what Jinja's `trim` and the templates' .strip() do): removes leading and trailing
// characters with the Unicode White_Space-like property Python uses (ASCII whitespace, U+001C..U+001F,
// U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) from UTF-8 text.
std::string_view python_strip(std::string_view s);

}  // namespace tilellm
