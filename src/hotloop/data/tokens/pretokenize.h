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
#include <optional>
#include <string_view>
#include <utility>

namespace hotloop::data {

enum class UnicodeClass : std::uint8_t { Other, Letter, Number, Space };

// Letter (L*), Number (N*), Space (White_Space) or Other.
UnicodeClass unicode_class(char32_t code_point);

// Calls `piece` with each piece of `text` in order; the pieces concatenate to
// `text`.
void gpt2_pretokenize(
    std::string_view text,
    const std::function<void(std::string_view)>& piece);

// tokenizers' Digits pre-tokenizer, then GPT-2's (SmolLM2's sequence): each
// number (every digit alone when `individual`, else each run of them) is a
// piece, and the text between numbers is cut by GPT-2's pattern.
void digits_gpt2_pretokenize(
    std::string_view text,
    bool individual,
    const std::function<void(std::string_view)>& piece);

// Llama 3's pre-tokenizer (max_digits 3), and Qwen2's (max_digits 1):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (Qwen2: \p{N} alone), matched by hand the same way.
void llama3_pretokenize(
    std::string_view text,
    int max_digits,
    const std::function<void(std::string_view)>& piece);

// Where NFC normalization could change `text`: the byte offset and code
// point of the first character that NFC replaces (quick check No), that
// composes with the starter before it, or a combining mark out of canonical
// order; nullopt when the text is NFC as it is.
std::optional<std::pair<std::size_t, char32_t>> first_not_nfc(
    std::string_view text);

} // namespace hotloop::data
