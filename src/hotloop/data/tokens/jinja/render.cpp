#include "hotloop/data/tokens/jinja/render.h"

#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "hotloop/data/tokens/jinja/builtins.h"

namespace hotloop::data::jinja {

namespace {

enum class Flow { Normal, Break, Continue };

bool has_generation_in(const Body& body) {
  for (const NodePtr& n : body) {
    if (n->kind == Node::Kind::Generation || has_generation_in(n->body) ||
        has_generation_in(n->otherwise)) {
      return true;
    }
    for (const auto& [cond, branch] : n->branches) {
      if (has_generation_in(branch)) {
        return true;
      }
    }
  }
  return false;
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  throw TemplateError(fmt::format(
      "unsupported operand types for {}: '{}' and '{}'",
      op,
      a.type_name(),
      b.type_name()));
}

bool contains(const Value& container, const Value& v) {
  if (container.is_string()) {
    if (!v.is_string()) {
      throw TemplateError(fmt::format(
          "'in <string>' requires a string on the left, not a {}",
          v.type_name()));
    }
    return container.as_string().find(v.as_string()) != std::string::npos;
  }
  if (container.is_dict() || container.is_namespace()) {
    return v.is_string() && container.find(v.as_string()) != nullptr;
  }
  if (container.is_undefined()) {
    return false;
  }
  for (const Value& e : iterate(container)) {
    if (equal(e, v)) {
      return true;
    }
  }
  return false;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) {
    --q;
  }
  return q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    return to_str(a) + to_str(b);
  }
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      return a.as_int() + b.as_int();
    }
    if (numbers) {
      return a.as_number() + b.as_number();
    }
    if (a.is_string() && b.is_string()) {
      return a.as_string() + b.as_string();
    }
    if (a.is_list() && b.is_list()) {
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return l;
    }
    unsupported("+", a, b);
  }
  if (op == "*" && (a.is_string() || a.is_list()) &&
      (b.is_int() || b.is_bool())) {
    const std::int64_t n = b.as_int();
    if (n > 0 && a.is_string() &&
        a.as_string().size() * static_cast<std::size_t>(n) >
            (std::size_t{64} << 20)) {
      throw TemplateError("a text repeated past 64 MiB");
    }
    if (a.is_string()) {
      std::string s;
      for (std::int64_t i = 0; i < n; ++i) {
        s += a.as_string();
      }
      return s;
    }
    List l;
    for (std::int64_t i = 0; i < n && l.size() < (std::size_t{1} << 20); ++i) {
      l.insert(l.end(), a.as_list().begin(), a.as_list().end());
    }
    return l;
  }
  if (!numbers) {
    unsupported(op.c_str(), a, b);
  }
  if (op == "-") {
    return ints ? Value(a.as_int() - b.as_int())
                : Value(a.as_number() - b.as_number());
  }
  if (op == "*") {
    return ints ? Value(a.as_int() * b.as_int())
                : Value(a.as_number() * b.as_number());
  }
  if (b.as_number() == 0.0 && op != "**") {
    throw TemplateError(fmt::format("division by zero ({})", op));
  }
  if (op == "/") {
    return a.as_number() / b.as_number();
  }
  if (op == "//") {
    return ints ? Value(floor_div(a.as_int(), b.as_int()))
                : Value(std::floor(a.as_number() / b.as_number()));
  }
  if (op == "%") {
    if (ints) {
      return a.as_int() - b.as_int() * floor_div(a.as_int(), b.as_int());
    }
    const double m = std::fmod(a.as_number(), b.as_number());
    return m != 0.0 && ((m < 0) != (b.as_number() < 0)) ? m + b.as_number() : m;
  }
  if (ints && b.as_int() >= 0 && b.as_int() < 64) {
    std::int64_t r = 1;
    for (std::int64_t i = 0; i < b.as_int(); ++i) {
      r *= a.as_int();
    }
    return r;
  }
  return std::pow(a.as_number(), b.as_number());
}

class Interpreter {
 public:
  Interpreter(const Dict& variables, const RenderLimits& limits)
      : limits_(limits) {
    frames_.emplace_back();
    for (auto& [k, v] : globals()) {
      frames_[0][k] = v;
    }
    for (const auto& [k, v] : variables) {
      frames_[0][k] = v;
    }
  }

  RenderOutput run(const Body& body) {
    out_ = &result_.text;
    exec(body);
    return std::move(result_);
  }

 private:
  using Frame = std::map<std::string, Value, std::less<>>;

  void step() {
    if (++steps_ > limits_.steps) {
      throw TemplateError(fmt::format(
          "the template ran past {} steps (a loop without end?)",
          limits_.steps));
    }
  }
  // What a call, filter or operator made costs steps by its size, so that a
  // template making big lists or texts in a loop meets the budget too.
  Value charged(Value v) {
    const std::int64_t size = v.is_list()
        ? static_cast<std::int64_t>(v.as_list().size())
        : v.is_string() ? static_cast<std::int64_t>(v.as_string().size() / 64)
                        : 0;
    steps_ += size;
    step();
    return v;
  }
  void write(std::string_view s) {
    if (out_->size() + s.size() > limits_.output_bytes) {
      throw TemplateError(fmt::format(
          "the template wrote past {} bytes", limits_.output_bytes));
    }
    out_->append(s);
  }
  Value lookup(const std::string& name) const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
      const auto it = f->find(name);
      if (it != f->end()) {
        return it->second;
      }
    }
    return Undefined{name};
  }
  void assign(const std::vector<std::string>& names, const Value& v) {
    if (names.size() == 1) {
      frames_.back()[names[0]] = v;
      return;
    }
    const List items = iterate(v);
    if (items.size() != names.size()) {
      throw TemplateError(fmt::format(
          "{} values to unpack into {} names", items.size(), names.size()));
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      frames_.back()[names[i]] = items[i];
    }
  }

  Flow exec(const Body& body) {
    for (const NodePtr& n : body) {
      Flow f = Flow::Normal;
      try {
        f = exec(*n);
      } catch (const TemplateRaised&) {
        throw;
      } catch (const TemplateError& e) {
        const std::string what = e.what();
        if (what.rfind("line ", 0) == 0) {
          throw;
        }
        throw TemplateError(
            fmt::format("line {}: {}", n->line, what), e.hint());
      }
      if (f != Flow::Normal) {
        return f;
      }
    }
    return Flow::Normal;
  }

  Flow exec(const Node& n) {
    step();
    switch (n.kind) {
      case Node::Kind::Text:
        write(n.text);
        return Flow::Normal;
      case Node::Kind::Output:
        write(to_str(eval(*n.expr)));
        return Flow::Normal;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches) {
          if (!cond || eval(*cond).truthy()) {
            return exec(body);
          }
        }
        return Flow::Normal;
      case Node::Kind::For:
        return exec_for(n);
      case Node::Kind::Set:
        if (n.attribute) {
          const Value ns = lookup(n.names[0]);
          if (!ns.is_namespace()) {
            throw TemplateError(fmt::format(
                "set {}.{}: '{}' is a {}, not a namespace()",
                n.names[0],
                n.names[1],
                n.names[0],
                ns.type_name()));
          }
          set_attribute(ns.as_namespace(), n.names[1], eval(*n.expr));
        } else {
          assign(n.names, eval(*n.expr));
        }
        return Flow::Normal;
      case Node::Kind::SetBlock:
        assign(n.names, capture(n.body));
        return Flow::Normal;
      case Node::Kind::Macro:
        frames_.back()[n.names[0]] = macro(n);
        return Flow::Normal;
      case Node::Kind::Generation: {
        const std::size_t begin = out_->size();
        const Flow f = exec(n.body);
        if (out_ == &result_.text && out_->size() > begin) {
          result_.generation.emplace_back(begin, out_->size());
        }
        return f;
      }
      case Node::Kind::Break:
        return Flow::Break;
      case Node::Kind::Continue:
        return Flow::Continue;
    }
    return Flow::Normal;
  }

  static void set_attribute(Namespace& ns, const std::string& name, Value v) {
    for (auto& [k, e] : ns.attributes) {
      if (k == name) {
        e = std::move(v);
        return;
      }
    }
    ns.attributes.emplace_back(name, std::move(v));
  }

  std::string capture(const Body& body) {
    std::string buffer;
    std::string* outer = out_;
    out_ = &buffer;
    try {
      exec(body);
    } catch (...) {
      out_ = outer;
      throw;
    }
    out_ = outer;
    return buffer;
  }

  Flow exec_for(const Node& n) {
    const List all = iterate(eval(*n.expr));
    List items;
    if (n.filter) {
      frames_.emplace_back();
      for (const Value& v : all) {
        step();
        assign(n.names, v);
        if (eval(*n.filter).truthy()) {
          items.push_back(v);
        }
      }
      frames_.pop_back();
    } else {
      items = all;
    }
    if (items.empty()) {
      return exec(n.otherwise);
    }
    const auto length = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < length; ++i) {
      step(); // an empty body still costs its iterations
      const auto at = static_cast<std::size_t>(i);
      frames_.emplace_back();
      assign(n.names, items[at]);
      frames_.back()["loop"] = Value(Dict{
          {"index", i + 1},
          {"index0", i},
          {"revindex", length - i},
          {"revindex0", length - i - 1},
          {"first", i == 0},
          {"last", i == length - 1},
          {"length", length},
          {"depth", 1},
          {"depth0", 0},
          {"previtem",
           i > 0 ? items[at - 1] : Value(Undefined{"loop.previtem"})},
          {"nextitem",
           i + 1 < length ? items[at + 1] : Value(Undefined{"loop.nextitem"})},
          {"cycle", Value(Function([i](Arguments& a) -> Value {
             if (a.positional.empty()) {
               throw TemplateError("loop.cycle() needs at least one value");
             }
             return a
                 .positional[static_cast<std::size_t>(i) % a.positional.size()];
           }))},
      });
      Flow f = Flow::Normal;
      try {
        f = exec(n.body);
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      frames_.pop_back();
      if (f == Flow::Break) {
        break;
      }
    }
    return Flow::Normal;
  }

  Value macro(const Node& n) {
    return Function([this, &n](Arguments& args) -> Value {
      if (++call_depth_ > limits_.call_depth) {
        --call_depth_;
        throw TemplateError(fmt::format(
            "macros called {} deep (a macro that calls itself without end?)",
            limits_.call_depth));
      }
      Frame params;
      if (args.positional.size() > n.parameters.size()) {
        throw TemplateError(fmt::format(
            "macro {} takes {} arguments, {} given",
            n.names[0],
            n.parameters.size(),
            args.positional.size()));
      }
      for (std::size_t i = 0; i < n.parameters.size(); ++i) {
        const auto& [name, def] = n.parameters[i];
        Value v = i < args.positional.size() ? args.positional[i]
            : def                            ? eval(*def)
                                             : Value(Undefined{name});
        for (const auto& [k, given] : args.named) {
          if (k == name) {
            v = given;
          }
        }
        params[name] = std::move(v);
      }
      // A macro sees the template's variables and its own, not its caller's.
      std::vector<Frame> saved(frames_.begin() + 1, frames_.end());
      frames_.resize(1);
      frames_.push_back(std::move(params));
      std::string text;
      try {
        text = capture(n.body);
      } catch (...) {
        frames_.resize(1);
        frames_.insert(frames_.end(), saved.begin(), saved.end());
        --call_depth_;
        throw;
      }
      frames_.resize(1);
      frames_.insert(frames_.end(), saved.begin(), saved.end());
      --call_depth_;
      return text;
    });
  }

  Arguments arguments(const Expr& e) {
    Arguments args;
    for (const ExprPtr& a : e.items) {
      args.positional.push_back(eval(*a));
    }
    for (const auto& [k, a] : e.named) {
      args.named.emplace_back(k, eval(*a));
    }
    return args;
  }

  Value eval(const Expr& e) {
    step();
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name:
        return lookup(e.name);
      case Expr::Kind::List: {
        List l;
        l.reserve(e.items.size());
        for (const ExprPtr& i : e.items) {
          l.push_back(eval(*i));
        }
        return l;
      }
      case Expr::Kind::Dict: {
        auto ns = std::make_shared<Namespace>();
        for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value k = eval(*e.items[i]);
          if (!k.is_string()) {
            throw TemplateError(fmt::format(
                "a dict key that is a {} (hotloop's dicts have text keys)",
                k.type_name()));
          }
          set_attribute(*ns, k.as_string(), eval(*e.items[i + 1]));
        }
        return Value(std::move(ns->attributes));
      }
      case Expr::Kind::Attribute:
        return attribute(eval(*e.a), e.name);
      case Expr::Kind::Subscript:
        return item(eval(*e.a), eval(*e.b));
      case Expr::Kind::Slice: {
        const Value object = eval(*e.a);
        Value parts[3];
        for (std::size_t i = 0; i < 3; ++i) {
          parts[i] = e.items[i] ? eval(*e.items[i]) : Value(None{});
        }
        return charged(slice(object, parts[0], parts[1], parts[2]));
      }
      case Expr::Kind::Call: {
        const Value callee = eval(*e.a);
        if (!callee.is_callable()) {
          throw TemplateError(fmt::format(
              "{} is not callable ({})",
              callee.is_undefined() ? "'" + callee.as_undefined().name + "'"
                                    : "a " + std::string(callee.type_name()),
              callee.is_undefined() ? "undefined" : "not a function"));
        }
        Arguments args = arguments(e);
        return charged(callee.as_function()(args));
      }
      case Expr::Kind::Filter: {
        const Value v = eval(*e.a);
        Arguments args = arguments(e);
        return charged(call_filter(e.name, v, args));
      }
      case Expr::Kind::Test: {
        const Value v = eval(*e.a);
        const Arguments args = arguments(e);
        return call_test(e.name, v, args.positional) != e.negated;
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.a);
        if (e.name == "not") {
          return !v.truthy();
        }
        if (!v.is_number()) {
          throw TemplateError(fmt::format(
              "bad operand type for unary {}: '{}'", e.name, v.type_name()));
        }
        if (e.name == "+") {
          return v.is_float() ? v : Value(v.as_int());
        }
        return v.is_float() ? Value(-v.as_number()) : Value(-v.as_int());
      }
      case Expr::Kind::Binary:
        return binary(e);
      case Expr::Kind::Conditional:
        if (eval(*e.b).truthy()) {
          return eval(*e.a);
        }
        return e.c ? eval(*e.c) : Value(Undefined{"if without else"});
    }
    return Undefined{};
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    Value a = eval(*e.a);
    if (op == "and") {
      return a.truthy() ? eval(*e.b) : a;
    }
    if (op == "or") {
      return a.truthy() ? a : eval(*e.b);
    }
    const Value b = eval(*e.b);
    if (op == "==") {
      return equal(a, b);
    }
    if (op == "!=") {
      return !equal(a, b);
    }
    if (op == "<") {
      return less(a, b);
    }
    if (op == ">") {
      return less(b, a);
    }
    if (op == "<=") {
      return !less(b, a);
    }
    if (op == ">=") {
      return !less(a, b);
    }
    if (op == "in") {
      return contains(b, a);
    }
    if (op == "not in") {
      return !contains(b, a);
    }
    return charged(arithmetic(op, a, b));
  }

  const RenderLimits& limits_;
  std::vector<Frame> frames_;
  RenderOutput result_;
  std::string* out_ = nullptr;
  std::int64_t steps_ = 0;
  int call_depth_ = 0;
};

} // namespace

Template::Template(std::string_view source)
    : body_(parse_template(source)),
      has_generation_(has_generation_in(*body_)) {}

RenderOutput Template::render(const Dict& variables, const RenderLimits& limits)
    const {
  return Interpreter(variables, limits).run(*body_);
}

} // namespace hotloop::data::jinja
