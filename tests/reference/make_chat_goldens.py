#!/usr/bin/env python3
"""Render conversations with the models' own Jinja chat templates (jinja2 is the reference) as goldens for
tests/tokenizer/test_chat_template.cpp.

Writes tests/data/chat/<name>.json:

    {"name": ..., "format": "ChatML" | "Gemma" | "Llama2" | "Llama3" | "Phi3", "arch": <general.architecture>,
     "source": <where the template text comes from>, "template": <the Jinja text>,
     "bos_token": ..., "eos_token": ...,
     "cases": [{"name": ..., "messages": [{"role": ..., "content": ...}], "add_generation_prompt": bool,
                "expected": <rendered text without the leading BOS text>}   -- or "error": <jinja's message>]}

Templates:
  smollm2  tokenizer.chat_template of models/SmolLM2-135M-Instruct.Q4_1.gguf (read from the file).
  gemma3   Google's Gemma 3 instruction-tuned template (tokenizer_config.json of google/gemma-3-*-it). The Gemma 3
           GGUF we test with carries no tokenizer.chat_template, so the text is kept here.
  llama3   Meta-Llama-3-8B-Instruct's template.
  llama2   Llama-2-*-chat-hf's template.
  phi3     microsoft/Phi-3.5-mini-instruct's template, as vendored in llama.cpp (models/templates/).

The environment is the one Hugging Face transformers renders chat templates with (sandboxed, trim_blocks and
lstrip_blocks on, raise_exception available), so the goldens are what the models saw in training. The engine does
not emit BOS (the tokenizer adds it), so a leading BOS text that the template emits is removed from the expected
string; every other special-token text (Llama 2's later "<s>", "</s>", Phi-3.5's final eos) stays.

Usage: python3 tests/reference/make_chat_goldens.py [--models-dir DIR] [--out-dir DIR]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from jinja2.exceptions import TemplateError
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
    ]


def raise_exception(message: str):
    raise TemplateError(message)


def render_cases(fam: dict) -> list[dict]:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(fam["template"])
    cases = []
    for name, messages in CONVERSATIONS:
        for add_gen in (False, True):
            case = {"name": f"{name}{'+gen' if add_gen else ''}", "messages": messages,
                    "add_generation_prompt": add_gen}
            try:
                text = template.render(messages=messages, add_generation_prompt=add_gen,
                                       bos_token=fam["bos_token"], eos_token=fam["eos_token"])
                # Only a BOS the template itself emits is removed (SmolLM2's BOS text is "<|im_start|>", which
                # its template never emits as BOS).
                if "bos_token" in fam["template"] and text.startswith(fam["bos_token"]):
                    text = text[len(fam["bos_token"]):]
                case["expected"] = text
            except TemplateError as e:  # includes UndefinedError (e.g. messages[0] of an empty list)
                case["error"] = str(e)
            cases.append(case)
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-dir", type=Path, default=ROOT / "models")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "tests" / "data" / "chat")
    args = ap.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for fam in families(args.models_dir):
        out = dict(fam, cases=render_cases(fam))
        path = args.out_dir / f"{fam['name']}.json"
        path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        n_err = sum("error" in c for c in out["cases"])
        print(f"{path.relative_to(ROOT)}: {len(out['cases'])} cases ({n_err} template errors)")


if __name__ == "__main__":
    main()
