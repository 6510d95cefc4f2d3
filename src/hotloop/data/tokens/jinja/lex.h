#pragma once
// A Jinja template's text as jinja/parse.h reads it: the source cut into
// text and tags with transformers' whitespace control (trim_blocks,
// lstrip_blocks, '-' and '+', one trailing newline dropped, comments and
// {% raw %}), and a tag's inside cut into tokens.

#include <string>
#include <string_view>
#include <vector>

#include "hotloop/data/tokens/jinja/value.h"

namespace hotloop::data::jinja {

// TemplateError "line N: what".
[[noreturn]] void fail(int line, const std::string& what);

struct Segment {
  enum class Kind { Text, Output, Statement };
  Kind kind = Kind::Text;
  std::string text; // the text, or the tag's inside
  int line = 1;
};

// The source as text and tags, whitespace control applied.
std::vector<Segment> segments_of(std::string_view src);

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End };
  Kind kind = Kind::End;
  std::string text;
  Value value; // a string's (unescaped) or a number's
};

// A tag's inside as tokens, ending with an End token.
std::vector<Token> tokens_of(std::string_view s, int line);

} // namespace hotloop::data::jinja
