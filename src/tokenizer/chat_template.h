// Chat templates: renders a conversation into the text a chat model was trained on, for the families TileLLM
// runs.
//
// GGUF files carry the Hugging Face Jinja template in `tokenizer.chat_template`. TileLLM does not run Jinja:
// it recognises the family by marker strings in the template (as llama.cpp's llm_chat_detect_template does)
// and renders with a hand-written equivalent of that family's reference template, including its quirks (roles
// that must alternate, trimmed contents, the system text folded into the first user turn). Template-specific
// literals that vary between models of one family, such as SmolLM2's default system message, are read out of
// the Jinja text.
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

// A format plus the literals one model's template adds to it.
struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  // ChatML only: the system text the model's template inserts when the conversation does not start with a
  // system message (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging Face").
  // Empty: none.
  std::string default_system;
};

// detect_chat_format plus the template's own literals. The default system message is the body of a single
// Jinja string literal of the form '<|im_start|>system\n<text><|im_end|>...' (a complete system turn written
// into the template, as SmolLM2's and Qwen2.5's are); a system turn assembled from message content is not a
// default.
ChatTemplate chat_template_from_gguf(const std::optional<std::string>& jinja_template, std::string_view arch);

// Renders the conversation as the model was trained to see it; with add_generation_prompt, ends with the
// assistant turn opener (Llama 2's template has none: its text already ends with " [/INST]"). Conversations
// the reference template rejects raise tilellm::Error with the template's reason: for Gemma and Llama 2, an
// empty conversation and roles that do not alternate user/assistant after an optional leading system message.
std::string apply_chat_template(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt);
// Same, for the bare format (no model-specific default system message).
std::string apply_chat_template(ChatFormat f, const std::vector<ChatMessage>& msgs,
                                bool add_generation_prompt);

// Texts that end an assistant turn in this format, for stop detection ("<|im_end|>", "<end_of_turn>", ...).
std::vector<std::string> chat_stop_strings(ChatFormat f);

// Python's str.strip() (what Jinja's `trim` and the templates' .strip() do): removes leading and trailing
// characters with the Unicode White_Space-like property Python uses (ASCII whitespace, U+001C..U+001F,
// U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) from UTF-8 text.
std::string_view python_strip(std::string_view s);

}  // namespace tilellm
