#include "hotloop/data/tokens/jinja/parse.h"

#include <cctype>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

namespace hotloop::data::jinja {

namespace {

constexpr int kMaxDepth = 256;

[[noreturn]] void fail(int line, const std::string& what) {
  throw TemplateError(fmt::format("line {}: {}", line, what));
}

// ---- The source as text and tags (whitespace control applied) ----

struct Segment {
  enum class Kind { Text, Output, Statement };
  Kind kind = Kind::Text;
  std::string text; // the text, or the tag's inside
  int line = 1;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
      c == '\v';
}

int lines_in(std::string_view s) {
  int n = 0;
  for (const char c : s) {
    n += c == '\n' ? 1 : 0;
  }
  return n;
}

// Where the tag that opens at `from` (just past its "{{" or "{%") closes:
// the position of its closing "}}"/"%}" (or "-}}"/"-%}"), past strings and
// balanced braces.
std::size_t tag_end(
    std::string_view s,
    std::size_t from,
    char close,
    int line) {
  int braces = 0;
  for (std::size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\'' || c == '"') {
      for (++i; i < s.size() && s[i] != c; ++i) {
        i += s[i] == '\\' ? 1 : 0;
      }
      continue;
    }
    if (braces == 0 && c == close && i + 1 < s.size() && s[i + 1] == '}') {
      return i;
    }
    braces += c == '{' ? 1 : c == '}' ? -1 : 0;
  }
  fail(line, fmt::format("a tag that never closes ('{}}}' missing)", close));
}

// Drops trailing spaces and tabs back to the line's start, when only they
// stand between it (or the template's start, `line_starting`) and the tag.
void lstrip_line(std::string& text, bool line_starting) {
  const std::size_t nl = text.rfind('\n');
  const std::size_t from = nl == std::string::npos ? 0 : nl + 1;
  if (nl == std::string::npos && !line_starting) {
    return;
  }
  for (std::size_t i = from; i < text.size(); ++i) {
    if (text[i] != ' ' && text[i] != '\t') {
      return;
    }
  }
  text.resize(from);
}

void rstrip_all(std::string& text) {
  while (!text.empty() && is_space(text.back())) {
    text.pop_back();
  }
}

bool is_raw(std::string word) {
  word.erase(0, word.find_first_not_of(" \t\r\n"));
  word.erase(word.find_last_not_of(" \t\r\n") + 1);
  return word == "raw";
}

// {% raw %}: the text from `i` up to {% endraw %}, as it is, into `out`;
// where the source goes on after {% endraw %} (and its trimmed newline).
std::size_t read_raw(
    std::string_view src,
    std::size_t i,
    int tag_line,
    int& line,
    bool& strip_next,
    std::vector<Segment>& out) {
  const std::size_t stop = src.find("endraw", i);
  const std::size_t tag_open =
      stop == std::string_view::npos ? stop : src.rfind("{%", stop);
  if (tag_open == std::string_view::npos || tag_open < i) {
    fail(tag_line, "{% raw %} without {% endraw %}");
  }
  std::string raw(src.substr(i, tag_open - i));
  if (tag_open + 2 < src.size() && src[tag_open + 2] == '-') {
    rstrip_all(raw);
  }
  out.push_back({Segment::Kind::Text, raw, line});
  const std::size_t close = src.find("%}", stop);
  if (close == std::string_view::npos) {
    fail(tag_line, "{% endraw %} never closes");
  }
  line += lines_in(src.substr(i, close + 2 - i));
  strip_next = close > 0 && src[close - 1] == '-';
  i = close + 2;
  if (!strip_next && i < src.size() && src[i] == '\n') {
    ++i;
    ++line;
  }
  return i;
}

std::vector<Segment> segments_of(std::string_view src) {
  if (!src.empty() && src.back() == '\n') { // keep_trailing_newline=False
    src.remove_suffix(src.size() >= 2 && src[src.size() - 2] == '\r' ? 2 : 1);
  }
  std::vector<Segment> out;
  std::string text;
  int line = 1;
  int text_line = 1;
  bool line_starting = true;
  bool strip_next = false; // the tag before ended with '-'
  std::size_t i = 0;
  const auto flush = [&] {
    if (!text.empty()) {
      out.push_back({Segment::Kind::Text, std::move(text), text_line});
    }
    text.clear();
  };
  while (i < src.size()) {
    const std::size_t open = src.find('{', i);
    const bool tag = open != std::string_view::npos && open + 1 < src.size() &&
        (src[open + 1] == '{' || src[open + 1] == '%' || src[open + 1] == '#');
    const std::size_t upto =
        tag ? open : (open == std::string_view::npos ? src.size() : open + 1);
    std::string_view piece = src.substr(i, upto - i);
    if (strip_next) {
      while (!piece.empty() && is_space(piece.front())) {
        piece.remove_prefix(1);
      }
      strip_next = piece.empty();
    }
    text += piece;
    line += lines_in(src.substr(i, upto - i));
    i = upto;
    if (!tag) {
      continue;
    }
    const char kind = src[open + 1];
    const int tag_line = line;
    std::size_t body = open + 2;
    const char mark = body < src.size() ? src[body] : ' ';
    if (mark == '-') {
      rstrip_all(text);
      ++body;
    } else if (mark == '+') {
      ++body;
    } else if (kind != '{') {
      lstrip_line(text, line_starting);
    }
    std::size_t end = 0;
    std::size_t after = 0;
    if (kind == '#') {
      end = src.find("#}", body);
      if (end == std::string_view::npos) {
        fail(tag_line, "a comment that never closes ('#}' missing)");
      }
      after = end + 2;
    } else {
      end = tag_end(src, body, kind == '{' ? '}' : '%', tag_line);
      after = end + 2;
    }
    std::size_t inner_end = end;
    bool trim = kind != '{';
    strip_next = false;
    if (inner_end > body && src[inner_end - 1] == '-') {
      --inner_end;
      strip_next = true;
      trim = false;
    } else if (inner_end > body && src[inner_end - 1] == '+') {
      --inner_end;
      trim = false;
    }
    line += lines_in(src.substr(open, after - open));
    line_starting = false;
    if (trim && after < src.size() && src[after] == '\n') {
      ++after;
      ++line;
      line_starting = true;
    } else if (
        trim && after + 1 < src.size() && src[after] == '\r' &&
        src[after + 1] == '\n') {
      after += 2;
      ++line;
      line_starting = true;
    }
    std::string inner(src.substr(body, inner_end - body));
    i = after;
    if (kind == '#') {
      flush(); // the text on each side of a comment is stripped on its own
      text_line = line;
      continue;
    }
    if (kind == '%' && is_raw(inner)) {
      flush();
      i = read_raw(src, i, tag_line, line, strip_next, out);
      text_line = line;
      continue;
    }
    flush();
    out.push_back(
        {kind == '{' ? Segment::Kind::Output : Segment::Kind::Statement,
         std::move(inner),
         tag_line});
    text_line = line;
  }
  flush();
  return out;
}

// ---- A tag's inside as tokens ----

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End };
  Kind kind = Kind::End;
  std::string text;
  Value value;
};

std::string unescape(std::string_view s, int line) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '0':
        out += '\0';
        break;
      case '\\':
      case '\'':
      case '"':
        out += c;
        break;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (i + n >= s.size()) {
          fail(line, "a \\x, \\u or \\U escape cut short");
        }
        const std::string hex(s.substr(i + 1, n));
        char* end = nullptr;
        const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
        if (end != hex.c_str() + n || cp > 0x10FFFF) {
          fail(line, fmt::format("a bad escape \\{}{}", c, hex));
        }
        i += n;
        if (cp < 0x80) {
          out += static_cast<char>(cp);
        } else if (cp < 0x800) {
          out += static_cast<char>(0xC0 | (cp >> 6));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          out += static_cast<char>(0xE0 | (cp >> 12));
          out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          out += static_cast<char>(0xF0 | (cp >> 18));
          out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
          out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        }
        break;
      }
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

std::vector<Token> tokens_of(std::string_view s, int line) {
  static const char* const kOps[] = {
      "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
      ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", "?"};
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) {
        ++j;
      }
      out.push_back({Token::Kind::Name, std::string(s.substr(i, j - i)), {}});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      bool is_float = false;
      while (j < s.size() &&
             (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_' ||
              (s[j] == '.' && !is_float && j + 1 < s.size() &&
               std::isdigit(static_cast<unsigned char>(s[j + 1]))))) {
        is_float = is_float || s[j] == '.';
        ++j;
      }
      std::string digits;
      for (std::size_t k = i; k < j; ++k) {
        if (s[k] != '_') {
          digits += s[k];
        }
      }
      Token t{is_float ? Token::Kind::Float : Token::Kind::Int, digits, {}};
      t.value = is_float ? Value(std::strtod(digits.c_str(), nullptr))
                         : Value(static_cast<std::int64_t>(
                               std::strtoll(digits.c_str(), nullptr, 10)));
      out.push_back(std::move(t));
      i = j;
    } else if (c == '\'' || c == '"') {
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        j += s[j] == '\\' ? 2 : 1;
      }
      if (j >= s.size()) {
        fail(line, "a string that never closes");
      }
      Token t{Token::Kind::String, {}, {}};
      t.value = unescape(s.substr(i + 1, j - i - 1), line);
      out.push_back(std::move(t));
      i = j + 1;
    } else {
      bool found = false;
      for (const char* op : kOps) {
        const std::string_view o(op);
        if (s.substr(i, o.size()) == o) {
          out.push_back({Token::Kind::Op, std::string(o), {}});
          i += o.size();
          found = true;
          break;
        }
      }
      if (!found) {
        fail(line, fmt::format("unexpected character '{}'", c));
      }
    }
  }
  out.push_back({Token::Kind::End, {}, {}});
  return out;
}

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
