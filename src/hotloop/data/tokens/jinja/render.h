#pragma once
// A Jinja template run as transformers runs a chat template (jinja2's
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
// loopcontrols and the `generation` block): text out, with the byte ranges
// the `{% generation %}` blocks wrote (transformers' assistant masks).
//
// Scoping is jinja2's: a for loop's body and a macro's have their own
// variables (a `set` inside a loop does not outlive it; a namespace's
// attributes do). A budget of steps, of output and of macro depth keeps a
// template that loops without end from hanging or filling memory.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hotloop/data/tokens/jinja/parse.h"
#include "hotloop/data/tokens/jinja/value.h"

namespace hotloop::data::jinja {

struct RenderLimits {
  std::int64_t steps = 10'000'000; // expressions and statements run
  std::size_t output_bytes = std::size_t{256} << 20;
  int call_depth = 64; // macros calling macros
};

struct RenderOutput {
  std::string text;
  // [begin, end) byte ranges of `text` written inside generation blocks.
  std::vector<std::pair<std::size_t, std::size_t>> generation;
};

class Template {
 public:
  // TemplateError "line N: what" for a template that does not parse.
  explicit Template(std::string_view source);
  // The text for `variables` (with the globals of jinja/builtins.h under
  // them). TemplateError "line N: what" for an error, a raise_exception
  // (its message) or a limit passed.
  RenderOutput render(const Dict& variables, const RenderLimits& limits = {})
      const;
  // Whether the template has a generation block (it says what is trained).
  bool has_generation() const {
    return has_generation_;
  }

 private:
  std::shared_ptr<const Body> body_;
  bool has_generation_ = false;
};

} // namespace hotloop::data::jinja
