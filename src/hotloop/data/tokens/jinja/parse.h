#pragma once
// Reading a Jinja template into its tree, as transformers' chat-template
// environment reads it: trim_blocks and lstrip_blocks on, `-` and `+`
// whitespace control, one trailing newline of the source dropped, the
// loopcontrols extension (break, continue) and transformers' `generation`
// block. What the tree holds is what jinja/render.h runs.
//
// Statements read: if/elif/else, for (tuple targets, an `if` filter, else),
// set (a name, names, a namespace's attribute, a block), macro, generation,
// break, continue, raw. Any other statement (include, import, extends,
// block, call, filter, with) is a TemplateError naming it and its line.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hotloop/data/tokens/jinja/value.h"

namespace hotloop::data::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal, // value
    Name, // name
    List, // items (a tuple is a list)
    Dict, // items: key, value, key, value, ...
    Attribute, // a.name
    Subscript, // a[b]
    Slice, // a[b:c:d], absent parts null
    Call, // a(items, named)
    Filter, // a|name(items, named)
    Test, // a is [not] name(items)
    Unary, // name ("not", "-", "+") a
    Binary, // a name b: or and == != < > <= >= in "not in" + - ~ * / // % **
    Conditional, // a if b else c (c null: undefined)
  };
  Kind kind = Kind::Literal;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> named;
  ExprPtr a, b, c;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    Text, // text
    Output, // {{ expr }}
    If, // branches (a null condition: else)
    For, // for names in expr [if filter]: body [else: otherwise]
    Set, // set names = expr; attribute: names[0].names[1] = expr
    SetBlock, // set names[0]: body
    Macro, // macro names[0](parameters): body
    Generation, // generation: body
    Break,
    Continue,
  };
  Kind kind = Kind::Text;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> names;
  bool attribute = false;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>> parameters;
  Body body;
  Body otherwise;
};

// The template's tree. TemplateError "line N: what" for a syntax error or
// a construct the interpreter lacks; a limit on nesting (256 deep) keeps a
// hostile template from overflowing the stack.
std::shared_ptr<const Body> parse_template(std::string_view source);

} // namespace hotloop::data::jinja
