#include "hotloop/data/tokens/pretokenize.h"

#include <algorithm>
#include <array>
#include <vector>

namespace hotloop::data {

namespace {

struct ClassRange {
  char32_t first;
  char32_t last;
  UnicodeClass cls;
};

constexpr ClassRange kRanges[] = {
#include "hotloop/data/tokens/unicode_classes.inc"
};

struct CodeRange {
  char32_t first;
  char32_t last;
};
struct CombiningRange {
  char32_t first;
  char32_t last;
  int cls;
};
struct CodePair {
  char32_t first;
  char32_t second;
};
#include "hotloop/data/tokens/nfc_check.inc"

template <typename R>
const R* find_range(const R* begin, const R* end, char32_t c) {
  const R* it = std::upper_bound(
      begin, end, c, [](char32_t v, const R& r) { return v < r.first; });
  if (it == begin) {
    return nullptr;
  }
  --it;
  return c <= it->last ? it : nullptr;
}

bool white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
      c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
      c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// One character: its class, where its bytes start, whether it is U+0020, and
// the ASCII byte (for the contractions), else 0.
struct Char {
  std::size_t begin = 0;
  UnicodeClass cls = UnicodeClass::Other;
  char ascii = 0;
};

// Decodes one UTF-8 sequence at text[i]; returns its length (1 for a byte
// that does not start a valid sequence) and the code point (or U+FFFD's
// stand-in -1 for an invalid byte).
std::size_t decode_utf8(std::string_view text, std::size_t i, char32_t& cp) {
  const auto b = [&](std::size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char c = b(i);
  std::size_t n = 0;
  char32_t v = 0;
  char32_t min = 0;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    n = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    cp = static_cast<char32_t>(-1);
    return 1;
  }
  if (i + n > text.size()) {
    cp = static_cast<char32_t>(-1);
    return 1;
  }
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) {
      cp = static_cast<char32_t>(-1);
      return 1;
    }
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    cp = static_cast<char32_t>(-1); // overlong, too large or a surrogate
    return 1;
  }
  cp = v;
  return n;
}

} // namespace

UnicodeClass unicode_class(char32_t c) {
  if (white_space(c)) {
    return UnicodeClass::Space;
  }
  const auto* end = std::end(kRanges);
  const auto* it = std::upper_bound(
      std::begin(kRanges), end, c, [](char32_t v, const ClassRange& r) {
        return v < r.first;
      });
  if (it == std::begin(kRanges)) {
    return UnicodeClass::Other;
  }
  --it;
  return c <= it->last ? it->cls : UnicodeClass::Other;
}

namespace {

// text's characters, and one more at its end (begin = text.size()).
std::vector<Char> characters(std::string_view text) {
  // ASCII's classes, looked up once.
  static const std::array<UnicodeClass, 128> kAscii = [] {
    std::array<UnicodeClass, 128> a{};
    for (char32_t c = 0; c < 128; ++c) {
      a[c] = unicode_class(c);
    }
    return a;
  }();
  std::vector<Char> chars;
  chars.reserve(text.size() + 1);
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t len = decode_utf8(text, i, cp);
    Char ch;
    ch.begin = i;
    if (cp < 128) {
      ch.cls = kAscii[cp];
      ch.ascii = static_cast<char>(cp);
    } else if (cp != static_cast<char32_t>(-1)) {
      ch.cls = unicode_class(cp);
    }
    chars.push_back(ch);
    i += len;
  }
  chars.push_back({text.size(), UnicodeClass::Other, 0}); // the end
  return chars;
}

// A text's characters with what both pre-tokenizers ask of them.
struct Cursor {
  explicit Cursor(std::string_view t)
      : text(t), chars(characters(t)), n(chars.size() - 1) {}

  bool is(std::size_t k, UnicodeClass c) const {
    return k < n && chars[k].cls == c;
  }
  char ascii(std::size_t k) const {
    return k < n ? chars[k].ascii : 0;
  }
  bool newline(std::size_t k) const {
    return ascii(k) == '\r' || ascii(k) == '\n';
  }
  // The end of the run of class `c` from k.
  std::size_t run(std::size_t k, UnicodeClass c) const {
    while (is(k, c)) {
      ++k;
    }
    return k;
  }
  // 's 't 'm 'd (2 characters) or 're 've 'll (3) at k, else 0; `fold`:
  // in either case.
  std::size_t contraction(std::size_t k, bool fold) const {
    if (ascii(k) != '\'') {
      return 0;
    }
    const auto at = [&](std::size_t m) {
      const char c = ascii(m);
      return fold && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a')
                                          : c;
    };
    const char a1 = at(k + 1);
    const char a2 = at(k + 2);
    if (a1 == 's' || a1 == 't' || a1 == 'm' || a1 == 'd') {
      return 2;
    }
    return ((a1 == 'r' || a1 == 'v') && a2 == 'e') || (a1 == 'l' && a2 == 'l')
        ? 3
        : 0;
  }
  // `\s+(?!\S)|\s+` at whitespace k: the run but its last character when
  // a non-space follows (it goes with what follows); a lone one alone.
  std::size_t spaces(std::size_t k) const {
    const std::size_t e = run(k, UnicodeClass::Space);
    return (e == n || e - k == 1) ? e : e - 1;
  }
  std::string_view piece(std::size_t i, std::size_t j) const {
    return text.substr(chars[i].begin, chars[j].begin - chars[i].begin);
  }

  std::string_view text;
  std::vector<Char> chars;
  std::size_t n; // characters, without the end marker
};

} // namespace

void gpt2_pretokenize(
    std::string_view text,
    const std::function<void(std::string_view)>& piece) {
  const Cursor t(text);
  std::size_t i = 0;
  while (i < t.n) {
    std::size_t j = i + t.contraction(i, false); // the piece is [i, j)
    if (j == i) {
      // ` ?X+` for X in letters, numbers, others: an optional U+0020, then a
      // run of one class.
      const bool space = t.ascii(i) == ' ';
      for (const UnicodeClass c :
           {UnicodeClass::Letter, UnicodeClass::Number, UnicodeClass::Other}) {
        if (t.is(i, c)) {
          j = t.run(i, c);
          break;
        }
        if (space && t.is(i + 1, c)) {
          j = t.run(i + 1, c);
          break;
        }
      }
      if (j == i) {
        j = t.spaces(i);
      }
    }
    piece(t.piece(i, j));
    i = j;
  }
}

void digits_gpt2_pretokenize(
    std::string_view text,
    bool individual,
    const std::function<void(std::string_view)>& piece) {
  // Numbers (N*, Rust's char::is_numeric, which tokenizers' Digits uses) are
  // cut out first; the text between them goes through GPT-2's pattern on
  // its own.
  std::size_t i = 0;
  std::size_t rest = 0; // where the text since the last number starts
  while (i < text.size()) {
    char32_t cp = 0;
    const std::size_t n = decode_utf8(text, i, cp);
    if (cp == static_cast<char32_t>(-1) ||
        unicode_class(cp) != UnicodeClass::Number) {
      i += n;
      continue;
    }
    if (rest < i) {
      gpt2_pretokenize(text.substr(rest, i - rest), piece);
    }
    std::size_t j = i + n;
    while (!individual && j < text.size()) {
      const std::size_t m = decode_utf8(text, j, cp);
      if (cp == static_cast<char32_t>(-1) ||
          unicode_class(cp) != UnicodeClass::Number) {
        break;
      }
      j += m;
    }
    piece(text.substr(i, j - i));
    i = rest = j;
  }
  if (rest < text.size()) {
    gpt2_pretokenize(text.substr(rest), piece);
  }
}

void llama3_pretokenize(
    std::string_view text,
    int max_digits,
    const std::function<void(std::string_view)>& piece) {
  const Cursor t(text);
  std::size_t i = 0;
  while (i < t.n) {
    std::size_t j = i + t.contraction(i, true); // the piece is [i, j)
    if (j > i) {
      // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    } else if (
        !t.is(i, UnicodeClass::Letter) && !t.is(i, UnicodeClass::Number) &&
        !t.newline(i) && t.is(i + 1, UnicodeClass::Letter)) {
      j = t.run(i + 1, UnicodeClass::Letter); // [^\r\n\p{L}\p{N}]\p{L}+
    } else if (t.is(i, UnicodeClass::Letter)) {
      j = t.run(i, UnicodeClass::Letter); // \p{L}+
    } else if (t.is(i, UnicodeClass::Number)) {
      // \p{N}{1,3} (Llama 3) or \p{N} (Qwen2)
      j = std::min(t.run(i, UnicodeClass::Number), i + max_digits);
    } else if (
        t.is(i, UnicodeClass::Other) ||
        (t.ascii(i) == ' ' && t.is(i + 1, UnicodeClass::Other))) {
      // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
      j = t.run(t.ascii(i) == ' ' ? i + 1 : i, UnicodeClass::Other);
      while (t.newline(j)) {
        ++j;
      }
    } else {
      // Whitespace. `\s*[\r\n]+`: up to the run's last CR or LF, when it
      // has one; else `\s+(?!\S)|\s+`.
      const std::size_t k = t.run(i, UnicodeClass::Space);
      std::size_t after_newline = i; // i: the run has no CR or LF
      for (std::size_t m = k; m > i; --m) {
        if (t.newline(m - 1)) {
          after_newline = m;
          break;
        }
      }
      j = after_newline > i ? after_newline : t.spaces(i);
    }
    piece(t.piece(i, j));
    i = j;
  }
}

namespace {

bool in(const CodeRange* begin, const CodeRange* end, char32_t c) {
  return find_range(begin, end, c) != nullptr;
}

// Whether `mark` (NFC quick check Maybe) composes with `starter`: a
// primary composite's pair, or Hangul's rule (a leading consonant and a vowel;
// an LV syllable and a trailing consonant).
bool composes(char32_t starter, char32_t mark) {
  if (mark >= 0x1161 && mark <= 0x1175) {
    return starter >= 0x1100 && starter <= 0x1112;
  }
  if (mark >= 0x11A8 && mark <= 0x11C2) {
    return starter >= 0xAC00 && starter <= 0xD7A3 &&
        (starter - 0xAC00) % 28 == 0;
  }
  const CodePair key{starter, mark};
  return std::binary_search(
      std::begin(kComposingPairs),
      std::end(kComposingPairs),
      key,
      [](const CodePair& x, const CodePair& y) {
        return x.first != y.first ? x.first < y.first : x.second < y.second;
      });
}

} // namespace

std::optional<std::pair<std::size_t, char32_t>> first_not_nfc(
    std::string_view text) {
  // The last starter (combining class 0): what a Maybe character would
  // compose with. Checking it against the last starter rather than only an
  // adjacent one is conservative: a blocked pair is refused too.
  char32_t starter = 0xFFFFFFFF; // none yet
  int previous_class = 0;
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t len = decode_utf8(text, i, cp);
    if (cp < 0x300 || cp == static_cast<char32_t>(-1)) {
      // All quick-check Yes, class 0 (an invalid byte composes with nothing).
      starter = cp;
      previous_class = 0;
      i += len;
      continue;
    }
    if (in(std::begin(kNfcNo), std::end(kNfcNo), cp)) {
      return std::pair{i, cp};
    }
    const CombiningRange* c = find_range(
        std::begin(kCombiningClasses), std::end(kCombiningClasses), cp);
    const int cls = c != nullptr ? c->cls : 0;
    if (cls != 0 && previous_class > cls) {
      return std::pair{i, cp}; // marks out of canonical order
    }
    if (in(std::begin(kNfcMaybe), std::end(kNfcMaybe), cp) &&
        composes(starter, cp)) {
      return std::pair{i, cp};
    }
    previous_class = cls;
    if (cls == 0) {
      starter = cp;
    }
    i += len;
  }
  return std::nullopt;
}

} // namespace hotloop::data
