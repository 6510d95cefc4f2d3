// The chat-template interpreter (data/tokens/jinja/render.h) against what
// jinja2 3.1 renders in transformers' environment (trim_blocks,
// lstrip_blocks, loopcontrols, generation), the expected texts taken from
// jinja2 itself; and the limits that keep a hostile template from hanging
// or crashing it. tests/data/chat_templates_hf.py runs real models'
// templates against transformers.

#include <gtest/gtest.h>

#include <string>

#include "hotloop/data/tokens/jinja/render.h"

namespace hotloop::data::jinja {
namespace {

Dict context() {
  return {
      {"xs", List{1, 2, 3, 4}},
      {"d", Dict{{"k", "v\u00e9"}, {"n", List{1, 2.5, true, None{}}}}},
      {"x", 1},
      {"ms",
       List{
           Dict{{"role", "user"}, {"content", "Hi"}},
           Dict{{"role", "assistant"}, {"content", "Yo"}},
           Dict{{"role", "user"}, {"content", "Q"}},
       }},
  };
}

std::string render(const std::string& source) {
  return Template(source).render(context()).text;
}

TEST(Jinja, WhitespaceControlIsTransformersTrimAndLstripBlocks) {
  EXPECT_EQ(
      render(
          "  {% if true %}\nA\n  {% endif %}\nB {{- ' C ' -}} D\n{# note #}\n  {%- if true +%}\nE{% endif %}\n"),
      "A\nB C D\n\nE");
}

TEST(Jinja, LoopsHaveLoopVariablesElseBreakAndContinue) {
  EXPECT_EQ(
      render(
          "{% for x in xs if x != 3 %}{{ loop.index }}/{{ loop.length }}{{ '^' if loop.first }}{{ '$' if loop.last }}{{ x }} {% else %}none{% endfor %}|{% for x in [] %}{% else %}empty{% endfor %}|{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
      "1/3^1 2/32 3/3$4 |empty|13");
}

TEST(Jinja, ASetInsideALoopEndsWithItAndANamespaceOutlivesIt) {
  EXPECT_EQ(
      render(
          "{% set a = 1 %}{% set ns = namespace(b=1) %}{% for x in xs %}{% set a = a + x %}{% set ns.b = ns.b + x %}{% endfor %}{{ a }} {{ ns.b }}"),
      "1 11");
}

TEST(Jinja, MacrosTakePositionalNamedAndDefaultArguments) {
  EXPECT_EQ(
      render(
          "{% macro tag(name, open=true) %}<{{ '' if open else '/' }}{{ name }}>{% endmacro %}{{ tag('b') }}x{{ tag('b', open=false) }}"),
      "<b>x</b>");
}

TEST(Jinja, FiltersAndOperatorsPrintAsPython) {
  EXPECT_EQ(
      render(
          "{{ '  hi  ' | trim }}|{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ xs | join(', ') }}|{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}|{{ xs | length }}|{{ 'ab' ~ 1 ~ none }}|{{ 'Hello' | upper }}{{ 3 // 2 }}{{ -7 % 3 }}{{ 7 / 2 }}{{ 1.0 }}"),
      "hi|{\"k\": \"v\u00e9\", \"n\": [1, 2.5, true, null]}|{\n  \"k\": \"v\u00e9\",\n  \"n\": [\n    1,\n    2.5,\n    true,\n    null\n  ]\n}|1, 2, 3, 4|['Hi', 'Q']|4|ab1None|HELLO123.51.0");
}

TEST(Jinja, SlicesAndStringMethodsCountCodePoints) {
  EXPECT_EQ(
      render(
          "{{ xs[::-1] }} {{ xs[1:] }} {{ xs[-1] }} {{ 'z\u00fcrich'[1:3] }} {{ 'abc'[::-1] }} {{ 'a,b,,c'.split(',') }} {{ ' x y '.split() }} {{ 'abc'.startswith(('x', 'a')) }} {{ '<think>x</think>y'.split('</think>')[-1].lstrip('\\n') }}"),
      "[4, 3, 2, 1] [2, 3, 4] 4 \u00fcr cba ['a', 'b', '', 'c'] ['x', 'y'] True y");
}

TEST(Jinja, TestsAndMembership) {
  EXPECT_EQ(
      render(
          "{{ x is defined }}{{ y is defined }}{{ none is none }}{{ 'a' is string }}{{ d is mapping }}{{ xs is iterable }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ x is number }}{{ true is boolean }}{{ 'ab' in 'cabd' }}{{ 2 in xs }}{{ 'k' in d }}"),
      "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue");
}

TEST(Jinja, GenerationBlocksGiveTheRangesTheyWrote) {
  const Template t(
      "{% for m in ms %}[{{ m.role }}]{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<end>{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}");
  EXPECT_TRUE(t.has_generation());
  const RenderOutput out = t.render(context());
  EXPECT_EQ(out.text, "[user]Hi[assistant]Yo<end>[user]Q");
  ASSERT_EQ(out.generation.size(), 1u);
  EXPECT_EQ(
      out.text.substr(
          out.generation[0].first,
          out.generation[0].second - out.generation[0].first),
      "Yo<end>");
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    render(
        "{% if ms[0].role != 'system' %}{{ raise_exception('System first!') }}{% endif %}");
    FAIL() << "no error";
  } catch (const TemplateRaised& e) {
    EXPECT_STREQ(e.what(), "System first!");
  }
}

TEST(Jinja, ErrorsNameTheLineAndWhat) {
  try {
    render("ok\n{{ nothing.here }}");
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_NE(
        std::string(e.what()).find("line 2: 'nothing' is undefined"),
        std::string::npos)
        << e.what();
  }
  try {
    render("{% include 'other.jinja' %}");
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_NE(
        std::string(e.what()).find("'{% include %}' is a construct"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(render("{% if true %}never closed"), TemplateError);
  EXPECT_THROW(render("{{ 'never closed }}"), TemplateError);
}

TEST(Jinja, ATemplateThatLoopsWithoutEndStopsAtItsStepBudget) {
  RenderLimits limits;
  limits.steps = 100'000;
  const Template t(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  try {
    t.render({}, limits);
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_NE(
        std::string(e.what()).find("ran past 100000 steps"), std::string::npos)
        << e.what();
  }
}

TEST(Jinja, AMacroThatCallsItselfStopsAtTheCallDepth) {
  const Template t("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_THROW(t.render({}), TemplateError);
}

TEST(Jinja, NestingPastTheLimitIsAnErrorNotACrash) {
  EXPECT_THROW(
      Template("{{ " + std::string(100000, '[') + " }}"), TemplateError);
  std::string deep;
  for (int i = 0; i < 1000; ++i) {
    deep += "{% if true %}";
  }
  EXPECT_THROW(Template{deep}, TemplateError);
}

} // namespace
} // namespace hotloop::data::jinja
