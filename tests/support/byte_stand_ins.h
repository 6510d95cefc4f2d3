#pragma once
// GPT-2's printable stand-in of each byte (byte-level BPE's vocabulary keys),
// for tests that write vocab.json or tokenizer.json by hand.

#include <string>
#include <vector>

namespace hotloop::test {

// Byte `b`'s stand-in, as UTF-8.
inline std::string stand_in(int b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int c = 0; c < 256; ++c) {
      const bool printable =
          (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      const int cp = printable ? c : next++;
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      t[c] = s;
    }
    return t;
  }();
  return table[b];
}

} // namespace hotloop::test
