// The chat-template interpreter (src/tokenizer/jinja.h) against Python's jinja2 in Hugging Face's
// chat-template environment: tests/data/chat/*.json (tests/reference/make_chat_goldens.py) hold jinja2's
// renderings of the templates of SmolLM2, Gemma 3, Llama 2, Llama 3, Llama 3.1 (tools), Phi-3.5, Qwen2.5
// (tools) and Qwen3 (tools, thinking), with plain, tool and thinking conversations, and of templates written
// to reach the interpreter's corners (jinja_adversarial.json). Every rendering must be byte-equal; where
// jinja2 raised, the interpreter must raise too, with raise_exception()'s own message where the template
// raised it. Templates using constructs the interpreter lacks (jinja_unsupported.json, all valid for jinja2)
// must be refused naming the construct.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../common/paths.h"
#include "base/error.h"
#include "tokenizer/jinja.h"

namespace tilellm {
namespace {

using nlohmann::ordered_json;

ordered_json load(const std::string& name) {
  const std::string path = test::source_path("tests/data/chat/" + name + ".json");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing " + path + ": run tests/reference/make_chat_goldens.py");
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

// The variables make_chat_goldens.py rendered the case with: transformers passes tools (None without any).
jinja::Value context_of(const ordered_json& c, const ordered_json& family) {
  ordered_json ctx = ordered_json::object();
  ctx["messages"] = c["messages"];
  ctx["add_generation_prompt"] = c["add_generation_prompt"];
  ctx["bos_token"] = family["bos_token"];
  ctx["eos_token"] = family["eos_token"];
  ctx["tools"] = nullptr;
  if (c.contains("extra")) {
    for (const auto& [k, v] : c["extra"].items()) ctx[k] = v;
  }
  return jinja::from_json(ctx);
}

// Renders every case of one template; returns how many there were.
size_t check_cases(const ordered_json& family) {
  const std::string name = family["name"].get<std::string>();
  const jinja::Template t(family["template"].get<std::string>());
  for (const auto& c : family["cases"]) {
    SCOPED_TRACE(name + " / " + c["name"].get<std::string>());
    const jinja::Value ctx = context_of(c, family);
    if (c.contains("error")) {
      try {
        const std::string got = t.render(ctx);
        ADD_FAILURE() << "rendered where jinja2 raised \"" << c["error"].get<std::string>() << "\":\n" << got;
      } catch (const jinja::TemplateError& e) {
        if (c["raised"].get<bool>()) {
          EXPECT_EQ(std::string(e.what()), c["error"].get<std::string>());
        }
      }
    } else {
      try {
        EXPECT_EQ(t.render(ctx), c["rendered"].get<std::string>());
      } catch (const Error& e) {
        ADD_FAILURE() << "raised where jinja2 rendered: " << e.what();
      }
    }
  }
  return family["cases"].size();
}

class JinjaFamily : public ::testing::TestWithParam<const char*> {};

TEST_P(JinjaFamily, renders_byte_equal_to_jinja2) {
  EXPECT_GE(check_cases(load(GetParam())), 40u);
}

INSTANTIATE_TEST_SUITE_P(Templates, JinjaFamily,
                         ::testing::Values("smollm2", "gemma3", "llama2", "llama3", "llama31", "phi3",
                                           "qwen25", "qwen3"));

TEST(Jinja, adversarial_templates_render_byte_equal_to_jinja2) {
  const ordered_json all = load("jinja_adversarial");
  ASSERT_GE(all.size(), 10u);
  for (const auto& t : all) {
    SCOPED_TRACE(t["what"].get<std::string>());
    check_cases(t);
  }
}

TEST(Jinja, unsupported_constructs_are_named) {
  const ordered_json all = load("jinja_unsupported");
  ASSERT_GE(all.size(), 6u);
  for (const auto& u : all) {
    SCOPED_TRACE(u["name"].get<std::string>());
    const std::string want = u["construct"].get<std::string>();
    try {
      const jinja::Template t(u["template"].get<std::string>());
      ordered_json ctx = {{"messages", u["messages"]}, {"add_generation_prompt", true}};
      const std::string got = t.render(jinja::from_json(ctx));
      ADD_FAILURE() << "rendered a template using " << want << ":\n" << got;
    } catch (const jinja::Unsupported& e) {
      EXPECT_EQ(e.construct(), want);
    }
  }
}

TEST(Jinja, syntax_errors_are_template_errors) {
  for (const char* bad :
       {"{% if x %}unclosed", "{{ 1 + }}", "{% endfor %}", "{{ 'open }}", "{% for in x %}{% endfor %}",
        "{# no end", "{{ x", "{% set %}", "{{ a b }}", "{% if %}{% endif %}"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(jinja::Template{bad}, jinja::TemplateError);
  }
}

// A template comes from a model file: whatever it holds ends in an error, never in a crash or a hang.
TEST(Jinja, hostile_templates_end_in_errors) {
  const jinja::Value ctx = jinja::from_json(ordered_json::object());
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THROW(jinja::Template{deep}, jinja::TemplateError);
  std::string nested;
  for (int i = 0; i < 1000; ++i) nested += "{% if true %}";
  EXPECT_THROW(jinja::Template{nested}, jinja::TemplateError);
  EXPECT_THROW(jinja::Template{"{{ " + std::string(5000, '-') + "1 }}"}, jinja::TemplateError);
  EXPECT_THROW(jinja::Template{"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"}.render(ctx),
               jinja::TemplateError);
  EXPECT_THROW(jinja::Template{"{{ 2 ** 100 }}"}.render(ctx), jinja::Unsupported);
  EXPECT_THROW(jinja::Template{"{{ 9223372036854775807 + 1 }}"}.render(ctx), jinja::Unsupported);
  EXPECT_THROW(jinja::Template{"{{ 'ab' * 1000000000 }}"}.render(ctx), jinja::TemplateError);
  EXPECT_THROW(jinja::Template{"{{ range(1000000) }}"}.render(ctx), jinja::TemplateError);
  EXPECT_THROW(jinja::Template{"{{ 1 // 0 }}"}.render(ctx), jinja::TemplateError);
  EXPECT_THROW(jinja::Template{"{{ nope.attr }}"}.render(ctx), jinja::TemplateError);
  EXPECT_EQ(jinja::Template{"{{ 2 ** 62 }}|{{ (-1) ** 1000001 }}"}.render(ctx), "4611686018427387904|-1");
}

TEST(Jinja, values_print_as_python_prints_them) {
  EXPECT_EQ(jinja::float_repr(1.0), "1.0");
  EXPECT_EQ(jinja::float_repr(0.1), "0.1");
  EXPECT_EQ(jinja::float_repr(1e-5), "1e-05");
  EXPECT_EQ(jinja::float_repr(0.0001), "0.0001");
  EXPECT_EQ(jinja::float_repr(1e16), "1e+16");
  EXPECT_EQ(jinja::float_repr(123456789012345.0), "123456789012345.0");
  EXPECT_EQ(jinja::float_repr(-2.5e-300), "-2.5e-300");
  EXPECT_EQ(jinja::to_json(jinja::from_json(ordered_json::parse(R"({"b":[1,2.0,"\u00e9\n"],"a":null})"))),
            "{\"b\": [1, 2.0, \"\xc3\xa9\\n\"], \"a\": null}");
}

}  // namespace
}  // namespace tilellm
