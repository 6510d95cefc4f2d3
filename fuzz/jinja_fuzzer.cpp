// libFuzzer target for the chat-template interpreter (data/tokens/jinja/):
// any template text must render or give a TemplateError, never a crash, a
// hang (the step budget) or a huge allocation (the output budget); what the
// generation blocks report lies inside the text. Built and run by fuzz/run,
// seeded with real models' templates (tests/data/chat_templates/).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hotloop/data/tokens/jinja/render.h"

namespace {

using namespace hotloop::data::jinja;

Dict conversation() {
  return {
      {"messages",
       List{
           Dict{{"role", "system"}, {"content", " Be brief.\n"}},
           Dict{{"role", "user"}, {"content", "Hi \u00e9"}},
           Dict{
               {"role", "assistant"},
               {"content", ""},
               {"tool_calls",
                List{Dict{
                    {"type", "function"},
                    {"function",
                     Dict{{"name", "f"}, {"arguments", Dict{{"x", 1}}}}}}}}},
           Dict{{"role", "tool"}, {"content", "42"}},
           Dict{{"role", "assistant"}, {"content", "<think>a</think>Yo"}},
       }},
      {"add_generation_prompt", true},
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"tools",
       List{Dict{{"type", "function"}, {"function", Dict{{"name", "f"}}}}}},
  };
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  static const Dict context = conversation();
  RenderLimits limits;
  limits.steps = 200'000;
  limits.output_bytes = std::size_t{1} << 20;
  try {
    const Template t(
        std::string_view(reinterpret_cast<const char*>(data), size));
    const RenderOutput out = t.render(context, limits);
    for (const auto& [begin, end] : out.generation) {
      if (begin > end || end > out.text.size()) {
        __builtin_trap();
      }
    }
  } catch (const TemplateError&) {
  }
  return 0;
}
