#!/usr/bin/env python3
"""`tilellm run --chat` with the model's own chat template, tried as a new user would, on random tiny models
(make_tiny_model.py --chat-template): the prompt --verbose-prompt shows must be what Python's jinja2 renders from
the same template in Hugging Face's environment (messages, add_generation_prompt, bos_token, eos_token, tools
None; a leading BOS text dropped, as the tokenizer adds BOS); a template using a construct the interpreter lacks
must give a warning naming it and the built-in format's prompt; a template that raises for the conversation
must be a one-line error with its message; --chat-template NAME must override the model's template.

    check_chat_template_cli.py TILELLM_BINARY
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import ROOT, Checks  # noqa: E402

from jinja2.ext import loopcontrols  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

# A ChatML template with a namespace, a macro, loop variables, filters and a default system turn.
OWN = """{%- set ns = namespace(n=0) -%}
{%- macro turn(role, text) -%}<|im_start|>{{ role }}
{{ text | trim }}<|im_end|>
{% endmacro -%}
{%- if messages[0].role != 'system' %}{{ turn('system', 'Tiny default, ' ~ messages|length ~ ' message(s).') }}{% endif -%}
{%- for m in messages %}{% set ns.n = ns.n + 1 %}{{ turn(m.role, m.content ~ ' #' ~ loop.index) }}{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}
"""
# Valid Jinja, but {% filter %} blocks are not implemented: the built-in chatml format renders instead.
UNSUPPORTED = ("{% filter upper %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
               "{% endfor %}{% endfilter %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
RAISES = ("{% for m in messages %}{% if m.role == 'user' and m.content|length > 3 %}"
          "{{ raise_exception('Messages longer than 3 characters are not allowed') }}{% endif %}"
          "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")


def jinja2_render(template: str, messages: list[dict]) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, tools=None,
                                            bos_token="!", eos_token='"')


def prompt_of(stderr: str) -> str | None:
    """The text --verbose-prompt printed: between 'prompt: "' and '"\\nnumber of tokens in prompt'."""
    m = re.search(r'^prompt: "(.*)"\nnumber of tokens in prompt = \d+$', stderr, re.S | re.M)
    return m.group(1) if m else None


def main() -> int:
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check
    with tempfile.TemporaryDirectory() as tmp:
        def model(name: str, template: str) -> str:
            tpl = os.path.join(tmp, name + ".jinja")
            with open(tpl, "w", encoding="utf-8") as f:
                f.write(template)
            path = os.path.join(tmp, name + ".gguf")
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reference", "make_tiny_model.py"), path,
                            "--type", "q8_0", "--chat-template", tpl], check=True)
            return path

        def run(path: str, *args: str) -> subprocess.CompletedProcess:
            return subprocess.run([binary, "run", "-m", path, "-t", "2", "-n", "1", "--temp", "0", "--verbose-prompt",
                                   *args], capture_output=True, text=True, timeout=120)

        own = model("own", OWN)
        for system in ("", "Be  brief. "):
            msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": " hi "}]
            r = run(own, "--chat", "-p", " hi ", *(["--system", system] if system else []))
            want = jinja2_render(OWN, msgs)
            got = prompt_of(r.stderr)
            check(r.returncode == 0 and got == want and "warning" not in r.stderr,
                  f"the model's own template{' with a system message' if system else ''}: the prompt equals "
                  f"jinja2's ({got!r} vs {want!r})")

        r = run(model("unsupported", UNSUPPORTED), "--chat", "-p", "hi")
        check(r.returncode == 0 and "warning: the model's chat template uses {% filter %}" in r.stderr
              and "using the built-in chatml format" in r.stderr,
              "a template using {% filter %}: a warning naming it and the built-in format")
        check(prompt_of(r.stderr) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
              f"... and the built-in chatml prompt ({prompt_of(r.stderr)!r})")

        raises = model("raises", RAISES)
        r = run(raises, "--chat", "-p", "hello")
        lines = [l for l in r.stderr.strip().splitlines() if l and not l.startswith(("model: ", "seed: "))]
        check(r.returncode != 0 and len(lines) == 1
              and lines[0] == "error: chat template: Messages longer than 3 characters are not allowed",
              f"a template that raises: one line with its message ({lines})")
        r = run(raises, "--chat", "-p", "hey")
        check(r.returncode == 0 and prompt_of(r.stderr) == "<|im_start|>user\nhey<|im_end|>\n",
              "... and renders what it accepts")

        r = run(own, "--chat-template", "llama3", "-p", "hi")
        check(r.returncode == 0 and prompt_of(r.stderr) ==
              "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
              "--chat-template llama3 overrides the model's template")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
