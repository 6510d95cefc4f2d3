#pragma once
// GPT-2's pre-tokenizer: text is cut into pieces before byte-level BPE runs on
// each piece, by the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (OpenAI's encoder.py; Hugging Face's ByteLevel pre-tokenizer), matched here
// by hand: C++'s std::regex has no Unicode classes. Letters and numbers come
// from scripts/gen-unicode-classes' tables, whitespace is Unicode's
// White_Space property. Bytes that are not valid UTF-8 count as one "other"
// character each, so any byte string is cut without loss.

#include <cstdint>
#include <functional>
#include <string_view>

namespace hotloop::data {

enum class UnicodeClass : std::uint8_t { Other, Letter, Number, Space };

// Letter (L*), Number (N*), Space (White_Space) or Other.
UnicodeClass unicode_class(char32_t code_point);

// Calls `piece` with each piece of `text` in order; the pieces concatenate to
// `text`.
void gpt2_pretokenize(
    std::string_view text,
    const std::function<void(std::string_view)>& piece);

} // namespace hotloop::data
