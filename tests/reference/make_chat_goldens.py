#!/usr/bin/env python3
"""Render conversations with the models' own Jinja chat templates (jinja2 is the reference) as goldens for
tests/tokenizer/test_chat_template.cpp (the built-in formats) and tests/tokenizer/test_jinja.cpp (the template
interpreter).

Writes tests/data/chat/<name>.json:

    {"name": ..., "format": "ChatML" | "Gemma" | "Llama2" | "Llama3" | "Phi3", "arch": <general.architecture>,
     "source": <where the template text comes from>, "template": <the Jinja text>,
     "bos_token": ..., "eos_token": ...,
     "cases": [{"name": ..., "messages": [{"role": ..., "content": ..., "tool_calls": ...}],
                "add_generation_prompt": bool, "extra": {<more variables: tools, enable_thinking, ...>},
                "rendered": <jinja2's text>, "expected": <the same without the leading BOS text>}
               -- or "error": <jinja's message>, "raised": <whether raise_exception() raised it>]}

and tests/data/chat/jinja_adversarial.json (templates written to reach the corners of the interpreter: whitespace
control, scoping, loops, filters, tests, methods, literals, arithmetic, printing; same case layout) and
tests/data/chat/jinja_unsupported.json (valid templates that use constructs the interpreter does not implement,
with the construct it must name; jinja2's rendering shows they are valid).

Families with tools (Qwen2.5, Qwen3, Llama 3.1) also render the tool conversations (TOOL_CONVERSATIONS: tool
schemas, assistant tool calls, tool results); every family renders them all, so templates without tool support
show what they do with such messages (often an error, which the interpreter must raise too).

Templates:
  smollm2  tokenizer.chat_template of models/SmolLM2-135M-Instruct.Q4_1.gguf (read from the file).
  gemma3   Google's Gemma 3 instruction-tuned template (tokenizer_config.json of google/gemma-3-*-it). The Gemma 3
           GGUF we test with carries no tokenizer.chat_template, so the text is kept here.
  llama3   Meta-Llama-3-8B-Instruct's template.
  llama2   Llama-2-*-chat-hf's template.
  phi3     microsoft/Phi-3.5-mini-instruct's template, as vendored in llama.cpp (models/templates/).
  qwen25   Qwen/Qwen2.5-7B-Instruct's template (tools), vendored in llama.cpp.
  qwen3    Qwen/Qwen3-0.6B's template (tools, thinking: namespace, reversed loops, string methods), vendored in
           llama.cpp; Qwen3-MoE models carry the same one.
  llama31  meta-llama/Llama-3.1-8B-Instruct's template (tools in the first user message, tojson(indent=4)).

The environment is the one Hugging Face transformers renders chat templates with (sandboxed, trim_blocks and
lstrip_blocks on, the loopcontrols extension, raise_exception, and transformers' own tojson filter:
json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)); like transformers, `tools` is
always passed (None without tools). So the goldens are what the models saw in training. The engine does not emit
BOS (the tokenizer adds it), so a leading BOS text that the template emits is removed from the expected string;
every other special-token text (Llama 2's later "<s>", "</s>", Phi-3.5's final eos) stays.

Usage: python3 tests/reference/make_chat_goldens.py [--models-dir DIR] [--out-dir DIR]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
LLAMA_CPP_TEMPLATES = Path("/root/.cache/tilellm/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates")

GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
    "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)

# Conversations: every one is rendered with and without the generation prompt.
CONVERSATIONS: list[tuple[str, list[dict[str, str]]]] = [
    ("user_only", [{"role": "user", "content": "Hello!"}]),
    ("system_user", [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}]),
    (
        "multi_turn",
        [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4."},
            {"role": "user", "content": "And 3+3?"},
        ],
    ),
    (
        "system_multi_turn",
        [
            {"role": "system", "content": "Answer in French.\nBe brief."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Bonjour !"},
            {"role": "user", "content": "Thanks"},
            {"role": "assistant", "content": "De rien."},
        ],
    ),
    (
        "whitespace_edges",
        [
            {"role": "system", "content": "  spaced system \n"},
            {"role": "user", "content": "  padded \n question\t\n"},
            {"role": "assistant", "content": "\n answer \t"},
            # U+00A0, U+3000 and U+2028 are whitespace to Python's strip() (jinja's trim) too.
            {"role": "user", "content": "\u00a0\u3000nbsp and ideographic space\u2028 \r\n"},
        ],
    ),
    (
        "unicode_and_markup",
        [
            {"role": "user", "content": "Grüße 👋 日本語 — {{ not jinja }} <|im_end|> <end_of_turn>"},
            {"role": "assistant", "content": "ok: \"quotes\" and 'apostrophes' and \\backslash\\"},
        ],
    ),
    ("empty_contents", [{"role": "system", "content": ""}, {"role": "user", "content": ""}]),
    ("system_only", [{"role": "system", "content": "Only a system prompt."}]),
    ("ends_with_assistant", [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "Hi"}]),
    ("starts_with_assistant", [{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "Ok"}]),
    ("two_users_in_a_row", [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]),
    (
        "system_in_the_middle",
        [
            {"role": "system", "content": "First system."},
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"},
            {"role": "system", "content": "Second system."},
            {"role": "user", "content": "u2"},
        ],
    ),
    ("empty_conversation", []),
]


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city — in °C or °F.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web.\nReturns <results>.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "max_results": {"type": "integer", "default": 5, "minimum": 1.5},
            "safe": {"type": "boolean", "default": True}, "lang": {"type": ["string", "null"], "default": None}},
            "required": ["query"]}}},
]


def call(name: str, arguments) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


# Conversations with tools: (name, messages, extra variables).
TOOL_CONVERSATIONS: list[tuple[str, list[dict], dict]] = [
    ("tools_user_only", [{"role": "user", "content": "Weather in Paris?"}], {"tools": TOOLS}),
    ("tools_system_user", [{"role": "system", "content": "You call tools."},
                           {"role": "user", "content": "Weather in Paris?"}], {"tools": TOOLS}),
    ("tool_call_and_result", [
        {"role": "system", "content": "You call tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]},
        {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5 °C and clear."},
        {"role": "user", "content": "Thanks!"},
    ], {"tools": TOOLS}),
    ("two_tool_calls", [
        {"role": "user", "content": "Search two things."},
        {"role": "assistant", "content": "Searching.", "tool_calls": [
            call("search", {"query": "jinja \"templates\"", "max_results": 3}),
            call("search", '{"query": "arguments as a string"}')]},
        {"role": "tool", "content": "result one"},
        {"role": "tool", "content": "result two"},
    ], {"tools": TOOLS}),
    ("tool_call_without_tools", [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Oslo"})]},
        {"role": "tool", "content": "cold"},
    ], {}),
    ("thinking", [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "<think>\nAgain.\n</think>\n\n6."},
    ], {}),
    ("thinking_off", [{"role": "user", "content": "Be quick."}], {"enable_thinking": False}),
    ("dated", [{"role": "user", "content": "What day is it?"}], {"date_string": "02 Dec 2026"}),
]


def smollm2_template(models_dir: Path) -> str:
    import gguf  # only this family needs the model file

    reader = gguf.GGUFReader(str(models_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    return reader.fields["tokenizer.chat_template"].contents()


def families(models_dir: Path) -> list[dict]:
    return [
        {"name": "smollm2", "format": "ChatML", "arch": "llama", "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
         "source": "tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf",
         "template": smollm2_template(models_dir)},
        {"name": "gemma3", "format": "Gemma", "arch": "gemma3", "bos_token": "<bos>", "eos_token": "<eos>",
         "source": "chat_template of google/gemma-3-*-it tokenizer_config.json (not stored in the test GGUF)",
         "template": GEMMA3_TEMPLATE},
        {"name": "llama3", "format": "Llama3", "arch": "llama", "bos_token": "<|begin_of_text|>",
         "eos_token": "<|eot_id|>", "source": "chat_template of meta-llama/Meta-Llama-3-8B-Instruct",
         "template": LLAMA3_TEMPLATE},
        {"name": "llama2", "format": "Llama2", "arch": "llama", "bos_token": "<s>", "eos_token": "</s>",
         "source": "chat_template of meta-llama/Llama-2-7b-chat-hf", "template": LLAMA2_TEMPLATE},
        {"name": "phi3", "format": "Phi3", "arch": "phi3", "bos_token": "<s>", "eos_token": "<|endoftext|>",
         "source": "llama.cpp models/templates/microsoft-Phi-3.5-mini-instruct.jinja",
         "template": (LLAMA_CPP_TEMPLATES / "microsoft-Phi-3.5-mini-instruct.jinja").read_text()},
        {"name": "qwen25", "format": "ChatML", "arch": "qwen2", "bos_token": "<|endoftext|>",
         "eos_token": "<|im_end|>", "source": "llama.cpp models/templates/Qwen-Qwen2.5-7B-Instruct.jinja",
         "template": (LLAMA_CPP_TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()},
        {"name": "qwen3", "format": "ChatML", "arch": "qwen3", "bos_token": "<|endoftext|>",
         "eos_token": "<|im_end|>", "source": "llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja",
         "template": (LLAMA_CPP_TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text()},
        {"name": "llama31", "format": "Llama3", "arch": "llama", "bos_token": "<|begin_of_text|>",
         "eos_token": "<|eot_id|>", "source": "llama.cpp models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
         "template": (LLAMA_CPP_TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text()},
    ]


class Raised(TemplateError):
    """What raise_exception() raises, told apart from jinja2's own errors."""


def raise_exception(message: str):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' tojson filter (chat templates' environment), not jinja2's HTML-safe one."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render_case(template, fam: dict, name: str, messages: list, add_gen: bool, extra: dict) -> dict:
    case = {"name": name, "messages": messages, "add_generation_prompt": add_gen}
    if extra:
        case["extra"] = extra
    variables = {"tools": None, **extra}
    try:
        text = template.render(messages=messages, add_generation_prompt=add_gen, bos_token=fam["bos_token"],
                               eos_token=fam["eos_token"], **variables)
        case["rendered"] = text
        # Only a BOS the template itself emits is removed (SmolLM2's BOS text is "<|im_start|>", which its
        # template never emits as BOS).
        if "bos_token" in fam["template"] and text.startswith(fam["bos_token"]):
            text = text[len(fam["bos_token"]):]
        case["expected"] = text
    except TemplateError as e:  # includes UndefinedError (e.g. messages[0] of an empty list)
        case["error"] = str(e)
        case["raised"] = isinstance(e, Raised)
    except TypeError as e:  # a Python type error inside the template (e.g. str + None)
        case["error"] = str(e)
        case["raised"] = False
    return case


def render_cases(fam: dict) -> list[dict]:
    template = environment().from_string(fam["template"])
    cases = []
    for name, messages in CONVERSATIONS:
        for add_gen in (False, True):
            cases.append(render_case(template, fam, f"{name}{'+gen' if add_gen else ''}", messages, add_gen, {}))
    for name, messages, extra in TOOL_CONVERSATIONS:
        for add_gen in (False, True):
            cases.append(render_case(template, fam, f"{name}{'+gen' if add_gen else ''}", messages, add_gen,
                                     extra))
    return cases


def write(path: Path, doc) -> None:
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-dir", type=Path, default=ROOT / "models")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "tests" / "data" / "chat")
    args = ap.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for fam in families(args.models_dir):
        out = dict(fam, cases=render_cases(fam))
        path = args.out_dir / f"{fam['name']}.json"
        write(path, out)
        n_err = sum("error" in c for c in out["cases"])
        print(f"{path.relative_to(ROOT)}: {len(out['cases'])} cases ({n_err} template errors)")

    from jinja_corner_cases import ADVERSARIAL, UNSUPPORTED  # beside this file
    env = environment()
    adversarial = []
    for t in ADVERSARIAL:
        fam = {"name": t["name"], "template": t["template"], "bos_token": "<s>", "eos_token": "</s>"}
        template = env.from_string(t["template"])
        cases = []
        for k, (messages, extra) in enumerate(t["contexts"]):
            for add_gen in (False, True):
                cases.append(render_case(template, fam, f"{t['name']}.{k}{'+gen' if add_gen else ''}", messages,
                                         add_gen, extra))
        adversarial.append(dict(fam, what=t["what"], cases=cases))
    write(args.out_dir / "jinja_adversarial.json", adversarial)
    n = sum(len(t["cases"]) for t in adversarial)
    print(f"tests/data/chat/jinja_adversarial.json: {len(adversarial)} templates, {n} cases")
    unsupported = []
    for t in UNSUPPORTED:
        fam = {"name": t["name"], "template": t["template"], "bos_token": "<s>", "eos_token": "</s>"}
        case = render_case(env.from_string(t["template"]), fam, t["name"], CONVERSATIONS[2][1], True, {})
        assert "rendered" in case, f"{t['name']}: jinja2 cannot render it either: {case.get('error')}"
        unsupported.append({"name": t["name"], "template": t["template"], "construct": t["construct"],
                            "messages": case["messages"], "rendered": case["rendered"]})
    write(args.out_dir / "jinja_unsupported.json", unsupported)
    print(f"tests/data/chat/jinja_unsupported.json: {len(unsupported)} templates")


if __name__ == "__main__":
    main()
