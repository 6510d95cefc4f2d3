#pragma once
// Reading a TOML file for the CLI (--config, --matrix): a syntax error is a
// ConfigError with the file, line and column.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "hotloop/errors.h"

namespace hotloop::cli {

// Whether the table header at `at` ('[' or "[[") starts with a name: a bare
// key's character or a quote, after blanks.
inline bool names_a_table(std::string_view text, std::size_t at) {
  std::size_t k = at + (at + 1 < text.size() && text[at + 1] == '[' ? 2 : 1);
  while (k < text.size() && (text[k] == ' ' || text[k] == '\t')) {
    ++k;
  }
  const char n = k < text.size() ? text[k] : '\n';
  return (n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') ||
      (n >= '0' && n <= '9') || n == '_' || n == '-' || n == '"' || n == '\'';
}

// The first character after the backslash at `at` and the blanks after it:
// '\n' for a line-ending backslash, '\0' at the end of the text.
inline char after_backslash(std::string_view text, std::size_t at) {
  std::size_t k = at + 1;
  while (k < text.size() &&
         (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) {
    ++k;
  }
  return k < text.size() ? text[k] : '\0';
}

// Where a line's code (outside strings and comments) stands, for what may
// come next. toml++ 3.3 reads a value ahead of a quote, a bracket or a
// second '=' as one word, asking of each character whether it is
// whitespace (see check_toml_text): such characters are allowed only where
// TOML has a string, key, array, table or inline table start.
struct TomlCode {
  char before = '\n'; // the last character but blanks; '\n' at the start
  bool value = false; // after the line's '=': a '.' there is a number's
  int braces = 0; // inline tables open

  // Why `c` cannot stand here, or nullptr.
  const char* refusal(char c) const {
    if (c == '=' && value && braces == 0) {
      return "a second '=' on a line";
    }
    const std::string_view after = c == '{' ? "=[,"
        : c == '['                          ? "\n=[,"
        : c == '"' || c == '\''             ? "\n=[,{."
                                            : std::string_view{};
    const char b = before == '.' && value ? '0' : before;
    return after.empty() || after.find(b) != std::string_view::npos
        ? nullptr
        : "a quote or bracket where none can start";
  }
  void take(char c) {
    if (c != ' ' && c != '\t' && c != '\r') {
      value = value || c == '=';
      braces += c == '{' ? 1 : c == '}' && braces > 0 ? -1 : 0;
      before = c;
    }
  }
};

// toml++ 3.3 (Debian 12's) reaches undefined behaviour on some text that is
// not TOML: a table header whose name starts with another character ("[\n",
// "[[{": a precondition, fixed upstream in marzer/tomlplusplus#301) and a
// character past U+00A0 where it looks for whitespace (an "unreachable"
// switch default). Where assertions are on the first ends the process.
// Such text is refused here first, by TOML's own rules: outside strings and
// comments only ASCII, no control characters but tab and line ends
// anywhere, quotes and brackets only where strings, keys, arrays and tables
// start, and a header names its table. One rule is stricter
// than TOML: after a multi-line string's line-ending backslash, the next
// character that is not whitespace must be ASCII. A line inside a
// multi-line string is not a header; hotloop's files hold no arrays of
// arrays or of inline tables, the only other lines that start with '['.
inline void check_toml_text(std::string_view text, const std::string& path) {
  enum class In { Code, Comment, Basic, Literal, MultiBasic, MultiLiteral };
  In in = In::Code;
  bool trimming = false; // after a line-ending backslash
  std::size_t line = 1;
  auto refuse = [&](const char* what) {
    throw ConfigError(
        fmt::format("{}:{}: {}", path, line, what),
        "the file must be TOML: key = value, one per line");
  };
  bool line_start = true;
  TomlCode code_at; // this line's code so far
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    const std::string_view three = text.substr(i, 3);
    if ((byte < 0x20 && c != '\t' && c != '\n' && c != '\r') || byte == 0x7F) {
      refuse("a control character (TOML has none outside an escape)");
    }
    if (c == '\n') {
      ++line;
      line_start = true;
      code_at = {};
      if (in == In::Code || in == In::Comment || in == In::Basic ||
          in == In::Literal) {
        in = In::Code;
      }
      continue;
    }
    if (trimming) {
      if (c == ' ' || c == '\t' || c == '\r') {
        continue;
      }
      trimming = false;
      if (byte >= 0x80) {
        refuse("a character past ASCII first after a line-ending backslash");
      }
    }
    if (line_start && in == In::Code && c != ' ' && c != '\t') {
      line_start = false;
      if (c == '[' && !names_a_table(text, i)) {
        refuse("a table header must start with the table's name");
      }
    }
    const bool code = in == In::Code;
    if (c == '\\' && (in == In::Basic || in == In::MultiBasic) &&
        static_cast<unsigned char>(after_backslash(text, i)) >= 0x80) {
      refuse("a character past ASCII after a backslash");
    }
    switch (in) {
      case In::Code:
        if (byte >= 0x80) {
          refuse("a character past ASCII outside a string or comment");
        } else if (const char* why = code_at.refusal(c)) {
          refuse(why);
        } else if (c == '#') {
          in = In::Comment;
        } else if (three == "\"\"\"" || three == "'''") {
          if (std::string_view("\n.{").find(code_at.before) !=
              std::string_view::npos) {
            refuse("a key cannot be a multi-line string");
          }
          in = c == '"' ? In::MultiBasic : In::MultiLiteral;
          i += 2;
        } else if (c == '"' || c == '\'') {
          in = c == '"' ? In::Basic : In::Literal;
        }
        break;
      case In::Basic:
        if (c == '\\') {
          ++i; // an escape (a newline there is an error toml++ reports)
          line += i < text.size() && text[i] == '\n' ? 1 : 0;
        } else if (c == '"') {
          in = In::Code;
        }
        break;
      case In::Literal:
        in = c == '\'' ? In::Code : in;
        break;
      case In::MultiBasic:
        if (c == '\\') {
          if (after_backslash(text, i) == '\n') {
            trimming = true; // the newline is counted when it is reached
          } else {
            ++i; // an escape
          }
        } else if (three == "\"\"\"") {
          in = In::Code;
          i += 2;
          // Up to two more quotes are the string's own last characters.
          for (int more = 0;
               more < 2 && i + 1 < text.size() && text[i + 1] == '"';
               ++more) {
            ++i;
          }
        }
        break;
      case In::MultiLiteral:
        if (three == "'''") {
          in = In::Code;
          i += 2;
          for (int more = 0;
               more < 2 && i + 1 < text.size() && text[i + 1] == '\'';
               ++more) {
            ++i;
          }
        }
        break;
      case In::Comment:
        break;
    }
    if (code) {
      code_at.take(c);
    }
  }
}

inline toml::table parse_toml_file(
    const std::string& path,
    const std::string& what, // "config file", "matrix file"
    const std::string& hint) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(
        fmt::format(
            "cannot read the {} {}: {}",
            what,
            path,
            std::filesystem::exists(path, ec) ? "not a file" : "no such file"),
        fmt::format(
            "check the path (a relative one starts from {})",
            std::filesystem::current_path(ec).string()));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    throw ConfigError(fmt::format("cannot read the {} {}", what, path));
  }
  check_toml_text(text.view(), path);
  try {
    return toml::parse(text.view(), path);
  } catch (const toml::parse_error& e) {
    if (e.source().begin.line == 0) { // opening or reading it failed
      throw ConfigError(fmt::format(
          "cannot read the {} {}: {}", what, path, e.description()));
    }
    throw ConfigError(
        fmt::format(
            "{}:{}:{}: {}",
            path,
            e.source().begin.line,
            e.source().begin.column,
            e.description()),
        hint);
  } catch (const std::exception& e) {
    throw ConfigError(
        fmt::format("cannot read the {} {}: {}", what, path, e.what()));
  }
}

} // namespace hotloop::cli
