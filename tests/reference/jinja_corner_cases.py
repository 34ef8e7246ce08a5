"""Templates written to reach the corners of the engine's chat-template interpreter (src/tokenizer/jinja.h), rendered
by jinja2 in Hugging Face's environment by make_chat_goldens.py into tests/data/chat/jinja_adversarial.json, and
valid templates using constructs the interpreter does not implement (jinja_unsupported.json: it must name them).

Each ADVERSARIAL entry: name, what it exercises, the template, and contexts (messages, extra variables), each
rendered with and without the generation prompt.
"""

from __future__ import annotations

SIMPLE = [{"role": "system", "content": "  Be brief.\n"}, {"role": "user", "content": "Hi <b>&</b> \u00e9\u00e8 \U0001f44b"},
          {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "again"}]
TWO = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
DATA = {"nums": [3, -1, 2.5, 10, 0], "words": ["Beta", "alpha", "Gamma", "alpha", "beta"],
        "people": [{"name": "Ann", "age": 31, "tags": ["x"]}, {"name": "bob", "age": 25, "tags": []},
                   {"name": "Cy", "age": 40, "tags": ["y", "z"]}],
        "d": {"z": 1, "a": [1, 2, {"k": None}], "m": "t\u00e9xt \"q\" \\ \n\t\u0001", "f": 1.0, "t": True},
        "empty": [], "text": "  a,b,,c  \n second line\r\nthird\u2028fourth  "}

ADVERSARIAL = [
    {
        "name": "whitespace",
        "what": "trim_blocks, lstrip_blocks, - and + on every side, comments alone on a line, a final newline",
        "template": (
            "{# a comment alone #}\n"
            "start\n"
            "    {% if true %}\n"
            "  indented block tag above is stripped\n"
            "    {%+ if true %} plus keeps the indent {% endif +%}\n"
            "{%- for m in messages %}\n"
            "  [{{ m.role }}]   {{- m.content -}}   |\n"
            "  {#- comment eating left #}  after\n"
            "{% endfor %}\n"
            "    {% endif %}\n"
            "text {{ 'var' }}\n"
            "  {{ 'var tag keeps its indent' }}\n"
            "{%- if add_generation_prompt -%}\n"
            "   GEN   \n"
            "{%- endif %}\n"
            "end\n"
        ),
        "contexts": [(SIMPLE, {}), (TWO, {})],
    },
    {
        "name": "scoping",
        "what": "set in loops stays in the iteration, namespaces cross it, set blocks, tuple assignment, shadowing",
        "template": (
            "{% set x = 'outer' %}{% set ns = namespace(count=0, last='', seen=[]) %}"
            "{% for m in messages %}{{ x }}{% set x = m.role %}:{{ x }};{% set ns.count = ns.count + 1 %}"
            "{% set ns.last = m.content %}{% endfor %}|{{ x }}|{{ ns.count }}|{{ ns.last }}|"
            "{% set a, b = 1, 'two' %}{{ a }}{{ b }}|{% set block %}B{{ a + 1 }}{% endset %}{{ block }}{{ block|length }}|"
            "{% for i in range(3) %}{% if i == 0 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}|"
            "{% set messages = messages[1:] %}{{ messages|length }}|{{ ns }}"
        ),
        "contexts": [(SIMPLE, {}), (TWO, {})],
    },
    {
        "name": "loops",
        "what": "loop variables, cycle, previtem/nextitem, for-else, filtered loops, break/continue, unpacking, dicts",
        "template": (
            "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/"
            "{{ loop.length }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}"
            "<{{ loop.previtem.role if loop.previtem is defined else '-' }}|{{ (loop.nextitem or {}).role }}>"
            "{{ loop.cycle('a', 'b', 'c') }} {% endfor %}\n"
            "{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role[0] }}{% else %}none{% endfor %}\n"
            "{% for x in empty %}never{% else %}empty-else{% endfor %}\n"
            "{% for n in nums %}{% if n < 0 %}{% continue %}{% endif %}{% if n > 5 %}{% break %}{% endif %}{{ n }},"
            "{% endfor %}\n"
            "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}\n"
            "{% for k in d %}{{ k }}{% endfor %}|{% for c in 'h\u00e9!' %}{{ c }}.{% endfor %}\n"
            "{% for i in range(2) %}{% for j in range(10, 4, -3) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}"
            "{{ loop.index }}{% endfor %}"
        ),
        "contexts": [(SIMPLE, DATA), (TWO, DATA)],
    },
    {
        "name": "filters",
        "what": "the filters chat templates call, with arguments and chains",
        "template": (
            "{{ words|join(', ') }}|{{ words|unique|list }}|{{ words|sort }}|{{ words|sort(case_sensitive=true) }}|"
            "{{ words|sort(reverse=true)|first }}|{{ words|last|upper }}|{{ words|length }}|{{ words|count }}\n"
            "{{ people|map(attribute='name')|join('/') }}|{{ people|selectattr('age', 'gt', 30)|map(attribute='name')"
            "|list }}|{{ people|rejectattr('tags')|list|length }}|{{ people|sort(attribute='age')|map(attribute='age')"
            "|list }}|{{ people|map(attribute='missing', default='?')|list }}\n"
            "{{ nums|select('odd')|list }}|{{ nums|reject('none')|sum }}|{{ nums|max }}|{{ nums|min }}|"
            "{{ nums|map('abs')|list }}|{{ nums|map('string')|join }}|{{ nums|map('int')|list }}\n"
            "{{ text|trim }}|{{ text|trim(' ac') }}|{{ text|replace(',', ';') }}|{{ text|replace(',', '', 2) }}\n"
            "{{ text|indent(3) }}|{{ text|indent(2, first=true, blank=true) }}|{{ 'x\n\ny'|indent('> ') }}\n"
            "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(sort_keys=true) }}|{{ empty|tojson(indent=4) }}\n"
            "{{ d|items|list }}|{{ d|dictsort }}|{{ d|dictsort(by='key', reverse=true)|first }}\n"
            "{{ undefined_thing|default('dflt') }}|{{ ''|default('e', true) }}|{{ none|default('n') }}|"
            "{{ '3.7'|float + 1 }}|{{ '42'|int * 2 }}|{{ 'x'|int(7) }}|{{ 2.567|round(2) }}|{{ 2.5|round }}|"
            "{{ 7.1|round(0, 'floor') }}|{{ -3|abs }}|{{ 'aBc dEf'|title }}|{{ 'aBc dEf'|capitalize }}|"
            "{{ '<a href=\"x\">&'|e }}|{{ 'q'|safe }}|{{ [3, 1]|reverse|list }}|{{ 'abc'|reverse }}|{{ 12|string }}"
        ),
        "contexts": [(TWO, DATA)],
    },
    {
        "name": "tests",
        "what": "is / is not with every test, with and without arguments",
        "template": (
            "{% set vals = [none, true, false, 0, 1, -2, 2.5, '', 'Ab', 'ab', 'AB', [], [1], {}, {'a': 1}] %}"
            "{% for v in vals %}"
            "{{ v is none }}{{ v is boolean }}{{ v is true }}{{ v is false }}{{ v is number }}{{ v is integer }}"
            "{{ v is float }}{{ v is string }}{{ v is mapping }}{{ v is iterable }}{{ v is sequence }}"
            "{{ v is defined }}{{ v is not undefined }}{{ v is callable }}{{ v is sameas false }}"
            "{{ v is eq 1 }}{{ v is equalto(0) }}{{ v is ne 1 }}{{ v is in [1, 'Ab'] }}"
            "{% if v is number %}{{ v is lt 1 }}{{ v is ge 0 }}{{ v is gt(0) }}{{ v is le 2.5 }}{% endif %}"
            "{% if v is integer %}{{ v is odd }}{{ v is even }}{{ v is divisibleby 2 }}{% endif %}"
            "{% if v is string %}{{ v is lower }}{{ v is upper }}{% endif %}\n"
            "{% endfor %}{{ nothing is defined }}{{ nothing is undefined }}{{ 'upper' is filter }}"
            "{{ 'odd' is test }}{{ range is callable }}{{ messages[0].role is string }}"
        ),
        "contexts": [(TWO, {})],
    },
    {
        "name": "methods",
        "what": "str, dict and list methods as Qwen-style templates call them",
        "template": (
            "{% set s = text %}{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.strip(' a') }}|"
            "{{ s.split() }}|{{ s.split(',') }}|{{ s.split(',', 1) }}|{{ s.rsplit(',', 1) }}|{{ s.split(None, 1) }}|"
            "{{ s.rsplit(None, 1) }}|{{ s.splitlines() }}|{{ s.splitlines(true) }}\n"
            "{{ s.startswith('  a') }}{{ s.startswith(('x', '  ')) }}{{ s.endswith('  ') }}{{ s.find('b') }}"
            "{{ s.rfind(',') }}{{ s.count(',') }}{{ s.find('zz') }}{{ 'a-b-c'.replace('-', '+') }}"
            "{{ 'a-b-c'.replace('-', '+', 1) }}{{ '-'.join(['x', 'y']) }}{{ 'Hi There'.upper() }}"
            "{{ 'Hi There'.lower() }}{{ 'hi there'.title() }}{{ 'hI'.capitalize() }}{{ '123'.isdigit() }}"
            "{{ 'a1'.isalnum() }}{{ ' \t'.isspace() }}{{ 'ab'.isalpha() }}{{ 'ab'.islower() }}{{ 'AB'.isupper() }}\n"
            "{{ d.get('z') }}{{ d.get('nope') }}{{ d.get('nope', 'dv') }}{{ d.keys()|list }}{{ d.values()|length }}"
            "{{ d['a'][2]['k'] }}{{ d.a[0] }}{{ d['missing'] is defined }}{{ words.index('Gamma') }}"
            "{{ words.count('alpha') }}\n"
            "{% set c = '<think>\nreason\n</think>\n\nanswer' %}{{ c.split('</think>')[-1].lstrip('\n') }}|"
            "{{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}|{{ '</think>' in c }}"
        ),
        "contexts": [(TWO, DATA)],
    },
    {
        "name": "expressions",
        "what": "literals, escapes, arithmetic, comparisons, logic, conditionals, slices, printing of every type",
        "template": (
            "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7.5 % 2 }}|"
            "{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1.5e-7 }}|{{ 123456789.0 * 1000000 }}|"
            "{{ 10 / 4 }}|{{ 1_000 }}|{{ -(3) }}|{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ [1, 2] + [3] }}|{{ 'a' ~ 1 ~ none }}\n"
            "{{ 'esc: \\t|\\n|\\\\|\\'|\\x41|\\u00e9|\\U0001F600|\\101' }}|{{ \"dq 'inner'\" }}|{{ 'adj' 'acent' }}\n"
            "{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 1 == 1.0 }}{{ 'a' != 'b' }}{{ 'b' > 'a' }}{{ [1, 2] < [1, 3] }}"
            "{{ 2 in [1, 2] }}{{ 'x' not in 'abc' }}{{ 'k' in {'k': 1} }}{{ not 0 }}{{ 0 or 'fallback' }}"
            "{{ 'first' or 'second' }}{{ 1 and 'both' }}{{ '' and 'no' }}{{ none or [] }}\n"
            "{{ 'yes' if messages else 'no' }}|{{ 'never' if false }}|{{ 'a' if 0 else 'b' if 1 else 'c' }}|"
            "{{ messages[-1].content }}|{{ messages[::-1][0].role }}|{{ 'h\u00e9llo'[1:4] }}|{{ 'hello'[::-2] }}|"
            "{{ nums[1:-1] }}|{{ nums[:2] }}|{{ nums[10:] }}|{{ nums[-2:] }}|{{ nums[5] is defined }}\n"
            "{{ none }}|{{ true }}|{{ false }}|{{ 0 }}|{{ -0.0 }}|{{ 3.0 }}|{{ [none, true, 1.0, 'a', \"b'c\"] }}|"
            "{{ {'k': [1, {'n': none}], 'q': 'it\\'s'} }}|{{ (1, 'a') }}|{{ () }}|{{ undefined_var }}|"
            "{{ ['\u00e9', '\n', '\u00a0', '\u3000'] }}"
        ),
        "contexts": [(TWO, DATA)],
    },
    {
        "name": "macros",
        "what": "macros with defaults and keyword arguments, called in loops and expressions",
        "template": (
            "{% macro turn(role, content, end='<|end|>', sep='\\n') %}<|{{ role }}|>{{ sep }}{{ content|trim }}{{ end }}"
            "{% endmacro %}"
            "{% for m in messages %}{{ turn(m.role, m.content) }}{{ turn(m.role, m.content, sep=' ', end='') }}"
            "{% endfor %}{% if add_generation_prompt %}{{ turn('assistant', '', end='') }}{% endif %}"
            "{{ turn('x', 'y')|length }}"
        ),
        "contexts": [(SIMPLE, {}), (TWO, {})],
    },
    {
        "name": "errors",
        "what": "raise_exception with the template's message, reached or not",
        "template": (
            "{% for m in messages %}{% if m.role not in ['user', 'assistant', 'system'] %}"
            "{{ raise_exception('Unknown role: ' ~ m.role) }}{% endif %}"
            "{% if loop.first and m.role == 'assistant' %}{{ raise_exception('The first message cannot be the "
            "assistant\\'s') }}{% endif %}{{ m.content }}{% endfor %}"
        ),
        "contexts": [(TWO, {}), ([{"role": "assistant", "content": "x"}], {}),
                     ([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}], {})],
    },
    {
        "name": "undefined",
        "what": "what jinja2 does with undefined values: prints nothing, is false, has no length, fails when used",
        "template": (
            "[{{ nope }}][{{ nope|length }}][{{ nope is defined }}][{{ nope|default('d') }}]"
            "[{{ messages[0].nope }}][{{ messages[7] }}][{% for x in nope %}x{% endfor %}][{{ nope ~ 'cat' }}]"
            "{% if nope %}yes{% else %}no{% endif %}{% if add_generation_prompt %}{{ nope.attribute }}{% endif %}"
        ),
        "contexts": [(TWO, {})],
    },
]

# Valid templates using a construct the interpreter does not implement, and the construct it must name.
UNSUPPORTED = [
    {"name": "filter_wordwrap", "construct": "the filter 'wordwrap'",
     "template": "{% for m in messages %}{{ m.content|wordwrap(10) }}{% endfor %}"},
    {"name": "filter_block", "construct": "{% filter %}",
     "template": "{% filter upper %}{% for m in messages %}{{ m.content }}{% endfor %}{% endfilter %}"},
    {"name": "call_block", "construct": "{% call %}",
     "template": "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}{{ messages[0].content }}{% endcall %}"},
    {"name": "str_format", "construct": "the method str.format()",
     "template": "{% for m in messages %}{{ '<{}>{}'.format(m.role, m.content) }}{% endfor %}"},
    {"name": "percent_format", "construct": "the % string formatting operator",
     "template": "{% for m in messages %}{{ '%s: %s' % (m.role, m.content) }}{% endfor %}"},
    {"name": "with_block", "construct": "{% with %}",
     "template": "{% with r = messages[0].role %}{{ r }}{% endwith %}"},
]
