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

void gpt2_pretokenize(
    std::string_view text,
    const std::function<void(std::string_view)>& piece) {
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
  const std::size_t n = chars.size();
  chars.push_back({text.size(), UnicodeClass::Other, 0}); // the end
  const auto is = [&](std::size_t k, UnicodeClass c) {
    return k < n && chars[k].cls == c;
  };
  const auto ascii = [&](std::size_t k) { return k < n ? chars[k].ascii : 0; };
  const auto run = [&](std::size_t k, UnicodeClass c) {
    while (is(k, c)) {
      ++k;
    }
    return k;
  };
  std::size_t i = 0;
  while (i < n) {
    std::size_t j = i; // the piece is chars [i, j)
    const char a1 = ascii(i + 1);
    const char a2 = ascii(i + 2);
    if (ascii(i) == '\'' &&
        (((a1 == 'r' || a1 == 'v') && a2 == 'e') || (a1 == 'l' && a2 == 'l'))) {
      j = i + 3; // 're 've 'll
    } else if (
        ascii(i) == '\'' &&
        (a1 == 's' || a1 == 't' || a1 == 'm' || a1 == 'd')) {
      j = i + 2; // 's 't 'm 'd
    } else {
      // ` ?X+` for X in letters, numbers, others: an optional U+0020, then a
      // run of one class.
      const bool space = ascii(i) == ' ';
      for (const UnicodeClass c :
           {UnicodeClass::Letter, UnicodeClass::Number, UnicodeClass::Other}) {
        if (is(i, c)) {
          j = run(i, c);
          break;
        }
        if (space && is(i + 1, c)) {
          j = run(i + 1, c);
          break;
        }
      }
      if (j == i) {
        // Whitespace: `\s+(?!\S)` leaves the run's last character to the
        // piece after it (when one follows); `\s+` takes a lone one.
        const std::size_t k = run(i, UnicodeClass::Space);
        j = (k == n || k - i == 1) ? k : k - 1;
      }
    }
    piece(text.substr(chars[i].begin, chars[j].begin - chars[i].begin));
    i = j;
  }
}

} // namespace hotloop::data
