#include "hotloop/data/tokens/jinja/parse.h"

#include <set>

#include <fmt/format.h>

#include "hotloop/data/tokens/jinja/lex.h"

namespace hotloop::data::jinja {

namespace {

constexpr int kMaxDepth = 256;

// ---- Expressions ----

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line)
      : t_(std::move(tokens)), line_(line) {}

  bool at_end() const {
    return t_[i_].kind == Token::Kind::End;
  }
  bool is_op(std::string_view op) const {
    return t_[i_].kind == Token::Kind::Op && t_[i_].text == op;
  }
  bool is_name(std::string_view n) const {
    return t_[i_].kind == Token::Kind::Name && t_[i_].text == n;
  }
  bool take_op(std::string_view op) {
    if (is_op(op)) {
      ++i_;
      return true;
    }
    return false;
  }
  bool take_name(std::string_view n) {
    if (is_name(n)) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect_op(std::string_view op) {
    if (!take_op(op)) {
      fail(line_, fmt::format("expected '{}', found {}", op, here()));
    }
  }
  std::string name() {
    if (t_[i_].kind != Token::Kind::Name) {
      fail(line_, fmt::format("expected a name, found {}", here()));
    }
    return t_[i_++].text;
  }
  void expect_end() {
    if (!at_end()) {
      fail(line_, fmt::format("unexpected {}", here()));
    }
  }
  std::string here() const {
    const Token& t = t_[i_];
    if (t.kind == Token::Kind::End) {
      return "the end of the tag";
    }
    if (t.kind == Token::Kind::String) {
      return to_repr(t.value);
    }
    return "'" + t.text + "'";
  }

  // A for loop's iterable: no conditional expression (its `if` filters).
  ExprPtr iterable() {
    deeper();
    ExprPtr e = or_expr();
    --depth_;
    return e;
  }

  // A full expression; a bare tuple (a, b) where `tuples` allows it.
  ExprPtr expression(bool tuples = false) {
    ExprPtr first = conditional();
    if (!tuples || !is_op(",")) {
      return first;
    }
    ExprPtr list = make(Expr::Kind::List);
    list->items.push_back(std::move(first));
    while (take_op(",")) {
      if (at_end() || is_op(")") || is_op("=")) {
        break;
      }
      list->items.push_back(conditional());
    }
    return list;
  }

 private:
  ExprPtr make(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line_;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    ExprPtr e = make(Expr::Kind::Binary);
    e->name = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }
  void deeper() {
    if (++depth_ > kMaxDepth) {
      fail(line_, fmt::format("an expression nested over {} deep", kMaxDepth));
    }
  }

  ExprPtr conditional() {
    deeper();
    ExprPtr value = or_expr();
    while (take_name("if")) {
      ExprPtr e = make(Expr::Kind::Conditional);
      e->b = or_expr();
      if (take_name("else")) {
        e->c = conditional();
      }
      e->a = std::move(value);
      value = std::move(e);
    }
    --depth_;
    return value;
  }
  ExprPtr or_expr() {
    ExprPtr left = and_expr();
    while (take_name("or")) {
      left = binary("or", std::move(left), and_expr());
    }
    return left;
  }
  ExprPtr and_expr() {
    ExprPtr left = not_expr();
    while (take_name("and")) {
      left = binary("and", std::move(left), not_expr());
    }
    return left;
  }
  ExprPtr not_expr() {
    if (take_name("not")) {
      deeper();
      ExprPtr e = make(Expr::Kind::Unary);
      e->name = "not";
      e->a = not_expr();
      --depth_;
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr left = math1();
    for (;;) {
      std::string op;
      for (const char* o : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (take_op(o)) {
          op = o;
          break;
        }
      }
      if (op.empty() && take_name("in")) {
        op = "in";
      } else if (
          op.empty() && is_name("not") &&
          t_[i_ + 1].kind == Token::Kind::Name && t_[i_ + 1].text == "in") {
        i_ += 2;
        op = "not in";
      }
      if (op.empty()) {
        return left;
      }
      left = binary(op, std::move(left), math1());
    }
  }
  ExprPtr math1() {
    ExprPtr left = concat();
    for (;;) {
      if (take_op("+")) {
        left = binary("+", std::move(left), concat());
      } else if (take_op("-")) {
        left = binary("-", std::move(left), concat());
      } else {
        return left;
      }
    }
  }
  ExprPtr concat() {
    ExprPtr left = math2();
    while (take_op("~")) {
      left = binary("~", std::move(left), math2());
    }
    return left;
  }
  ExprPtr math2() {
    ExprPtr left = power();
    for (;;) {
      std::string op;
      for (const char* o : {"//", "*", "/", "%"}) {
        if (take_op(o)) {
          op = o;
          break;
        }
      }
      if (op.empty()) {
        return left;
      }
      left = binary(op, std::move(left), power());
    }
  }
  ExprPtr power() {
    ExprPtr left = unary();
    while (take_op("**")) {
      left = binary("**", std::move(left), unary());
    }
    return left;
  }
  ExprPtr unary() {
    if (is_op("-") || is_op("+")) {
      deeper();
      ExprPtr e = make(Expr::Kind::Unary);
      e->name = t_[i_++].text;
      e->a = unary();
      --depth_;
      return e;
    }
    return filters(postfix(primary()));
  }
  ExprPtr primary() {
    const Token& t = t_[i_];
    if (t.kind == Token::Kind::String) {
      std::string s;
      while (t_[i_].kind == Token::Kind::String) {
        s += t_[i_++].value.as_string();
      }
      ExprPtr e = make(Expr::Kind::Literal);
      e->value = std::move(s);
      return e;
    }
    if (t.kind == Token::Kind::Int || t.kind == Token::Kind::Float) {
      ExprPtr e = make(Expr::Kind::Literal);
      e->value = t_[i_++].value;
      return e;
    }
    if (t.kind == Token::Kind::Name) {
      const std::string n = t_[i_++].text;
      ExprPtr e = make(Expr::Kind::Literal);
      if (n == "true" || n == "True") {
        e->value = true;
      } else if (n == "false" || n == "False") {
        e->value = false;
      } else if (n == "none" || n == "None") {
        e->value = None{};
      } else {
        e->kind = Expr::Kind::Name;
        e->name = n;
      }
      return e;
    }
    deeper();
    ExprPtr e;
    if (take_op("(")) {
      if (take_op(")")) {
        e = make(Expr::Kind::List);
      } else {
        e = expression(true);
        expect_op(")");
      }
    } else if (take_op("[")) {
      e = make(Expr::Kind::List);
      while (!take_op("]")) {
        e->items.push_back(conditional());
        if (!take_op(",")) {
          expect_op("]");
          break;
        }
      }
    } else if (take_op("{")) {
      e = make(Expr::Kind::Dict);
      while (!take_op("}")) {
        e->items.push_back(conditional());
        expect_op(":");
        e->items.push_back(conditional());
        if (!take_op(",")) {
          expect_op("}");
          break;
        }
      }
    } else {
      fail(line_, fmt::format("unexpected {}", here()));
    }
    --depth_;
    return e;
  }
  void call_arguments(Expr& call) {
    while (!take_op(")")) {
      if (t_[i_].kind == Token::Kind::Name &&
          t_[i_ + 1].kind == Token::Kind::Op && t_[i_ + 1].text == "=") {
        std::string key = name();
        ++i_;
        call.named.emplace_back(std::move(key), conditional());
      } else {
        if (!call.named.empty()) {
          fail(line_, "a positional argument after a named one");
        }
        call.items.push_back(conditional());
      }
      if (!take_op(",")) {
        expect_op(")");
        break;
      }
    }
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (take_op(".")) {
        ExprPtr a = make(Expr::Kind::Attribute);
        if (t_[i_].kind == Token::Kind::Int) {
          a->kind = Expr::Kind::Subscript;
          a->b = make(Expr::Kind::Literal);
          a->b->value = t_[i_++].value;
        } else {
          a->name = name();
        }
        a->a = std::move(e);
        e = std::move(a);
      } else if (take_op("[")) {
        e = subscript(std::move(e));
      } else if (take_op("(")) {
        ExprPtr c = make(Expr::Kind::Call);
        c->a = std::move(e);
        call_arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr subscript(ExprPtr object) {
    ExprPtr parts[3];
    int colons = 0;
    while (!take_op("]")) {
      if (take_op(":")) {
        if (++colons > 2) {
          fail(line_, "a slice with more than two ':'");
        }
        continue;
      }
      if (parts[colons]) {
        fail(line_, fmt::format("unexpected {} in a subscript", here()));
      }
      parts[colons] = conditional();
    }
    ExprPtr e = make(colons == 0 ? Expr::Kind::Subscript : Expr::Kind::Slice);
    e->a = std::move(object);
    if (colons == 0) {
      if (!parts[0]) {
        fail(line_, "an empty subscript []");
      }
      e->b = std::move(parts[0]);
    } else {
      e->items.resize(3);
      for (int k = 0; k < 3; ++k) {
        e->items[static_cast<std::size_t>(k)] = std::move(parts[k]);
      }
    }
    return e;
  }
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (take_op("|")) {
        ExprPtr f = make(Expr::Kind::Filter);
        f->name = name();
        while (take_op(".")) {
          f->name += "." + name();
        }
        if (take_op("(")) {
          call_arguments(*f);
        }
        f->a = std::move(e);
        e = std::move(f);
      } else if (take_name("is")) {
        ExprPtr test = make(Expr::Kind::Test);
        test->negated = take_name("not");
        test->name = name();
        if (take_op("(")) {
          call_arguments(*test);
        } else if (
            t_[i_].kind == Token::Kind::String ||
            t_[i_].kind == Token::Kind::Int ||
            t_[i_].kind == Token::Kind::Float ||
            (t_[i_].kind == Token::Kind::Name && !is_name("and") &&
             !is_name("or") && !is_name("else") && !is_name("if") &&
             !is_name("in") && !is_name("not") && !is_name("is"))) {
          test->items.push_back(postfix(primary()));
        }
        test->a = std::move(e);
        e = std::move(test);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  int line_;
  int depth_ = 0;
};

// ---- Statements ----

class Parser {
 public:
  explicit Parser(std::vector<Segment> s) : s_(std::move(s)) {}

  Body program() {
    std::string ended;
    Body body = block({}, ended, 0);
    return body;
  }

 private:
  // Statements until one whose first word is in `ends` (returned in
  // `ended`, its parser left in `rest_`); all of them at the top.
  Body block(const std::set<std::string>& ends, std::string& ended, int depth) {
    if (depth > kMaxDepth) {
      fail(line(), fmt::format("blocks nested over {} deep", kMaxDepth));
    }
    Body body;
    while (i_ < s_.size()) {
      const Segment& seg = s_[i_++];
      if (seg.kind == Segment::Kind::Text) {
        auto n = node(Node::Kind::Text, seg.line);
        n->text = seg.text;
        body.push_back(std::move(n));
        continue;
      }
      ExprParser p(tokens_of(seg.text, seg.line), seg.line);
      if (seg.kind == Segment::Kind::Output) {
        auto n = node(Node::Kind::Output, seg.line);
        n->expr = p.expression(true);
        p.expect_end();
        body.push_back(std::move(n));
        continue;
      }
      const std::string word = p.name();
      if (ends.count(word) != 0) {
        ended = word;
        rest_ = std::make_unique<ExprParser>(std::move(p));
        return body;
      }
      body.push_back(statement(word, p, seg.line, depth));
    }
    if (!ends.empty()) {
      fail(
          line(),
          fmt::format(
              "the template ends inside a block ({} missing)", *ends.rbegin()));
    }
    return body;
  }

  NodePtr statement(const std::string& word, ExprParser& p, int at, int depth) {
    if (word == "if") {
      auto n = node(Node::Kind::If, at);
      ExprPtr cond = p.expression();
      p.expect_end();
      for (;;) {
        std::string ended;
        Body body = block({"elif", "else", "endif"}, ended, depth + 1);
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (ended == "endif") {
          rest_->expect_end();
          return n;
        }
        if (ended == "else") {
          rest_->expect_end();
          Body last = block({"endif"}, ended, depth + 1);
          rest_->expect_end();
          n->branches.emplace_back(nullptr, std::move(last));
          return n;
        }
        cond = rest_->expression();
        rest_->expect_end();
      }
    }
    if (word == "for") {
      auto n = node(Node::Kind::For, at);
      n->names.push_back(p.name());
      while (p.take_op(",")) {
        n->names.push_back(p.name());
      }
      if (!p.take_name("in")) {
        fail(at, "for: expected 'in'");
      }
      n->expr = p.iterable();
      if (p.take_name("if")) {
        n->filter = p.expression();
      }
      if (p.take_name("recursive")) {
        fail(at, "for ... recursive: not supported by hotloop's interpreter");
      }
      p.expect_end();
      std::string ended;
      n->body = block({"else", "endfor"}, ended, depth + 1);
      rest_->expect_end();
      if (ended == "else") {
        n->otherwise = block({"endfor"}, ended, depth + 1);
        rest_->expect_end();
      }
      return n;
    }
    if (word == "set") {
      auto n = node(Node::Kind::Set, at);
      n->names.push_back(p.name());
      if (p.take_op(".")) {
        n->attribute = true;
        n->names.push_back(p.name());
      } else {
        while (p.take_op(",")) {
          n->names.push_back(p.name());
        }
      }
      if (!p.take_op("=")) {
        if (n->attribute || n->names.size() != 1) {
          fail(at, "set: expected '='");
        }
        p.expect_end();
        n->kind = Node::Kind::SetBlock;
        std::string ended;
        n->body = block({"endset"}, ended, depth + 1);
        rest_->expect_end();
        return n;
      }
      n->expr = p.expression(true);
      p.expect_end();
      return n;
    }
    if (word == "macro") {
      auto n = node(Node::Kind::Macro, at);
      n->names.push_back(p.name());
      p.expect_op("(");
      while (!p.take_op(")")) {
        std::string param = p.name();
        ExprPtr def = p.take_op("=") ? p.expression() : nullptr;
        n->parameters.emplace_back(std::move(param), std::move(def));
        if (!p.take_op(",")) {
          p.expect_op(")");
          break;
        }
      }
      p.expect_end();
      std::string ended;
      n->body = block({"endmacro"}, ended, depth + 1);
      rest_->expect_end();
      return n;
    }
    if (word == "generation") {
      p.expect_end();
      auto n = node(Node::Kind::Generation, at);
      std::string ended;
      n->body = block({"endgeneration"}, ended, depth + 1);
      rest_->expect_end();
      return n;
    }
    if (word == "break" || word == "continue") {
      p.expect_end();
      return node(
          word == "break" ? Node::Kind::Break : Node::Kind::Continue, at);
    }
    fail(
        at,
        fmt::format(
            "'{{% {} %}}' is a construct hotloop's template interpreter lacks (it runs if, for, set, macro, generation, break, continue)",
            word));
  }

  static NodePtr node(Node::Kind kind, int at) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = at;
    return n;
  }
  int line() const {
    return s_.empty() ? 1 : s_[std::min(i_, s_.size() - 1)].line;
  }

  std::vector<Segment> s_;
  std::size_t i_ = 0;
  std::unique_ptr<ExprParser> rest_;
};

} // namespace

std::shared_ptr<const Body> parse_template(std::string_view source) {
  return std::make_shared<const Body>(Parser(segments_of(source)).program());
}

} // namespace hotloop::data::jinja
