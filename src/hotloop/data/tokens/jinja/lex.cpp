#include "hotloop/data/tokens/jinja/lex.h"

#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

namespace hotloop::data::jinja {

void fail(int line, const std::string& what) {
  throw TemplateError(fmt::format("line {}: {}", line, what));
}

namespace {

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

} // namespace

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

} // namespace hotloop::data::jinja
