// libFuzzer target for the tokenizer.json reader (a Hugging Face model
// folder's tokenizer, data/tokens/tokenizer.h): any file must load or give a
// DataError, never a crash, a hang or a huge allocation; a tokenizer that
// loads encodes a text with non-ASCII and special-token text into ids inside
// its vocabulary, each of which decodes. Built and run by fuzz/run, seeded
// with tokenizers' own files (GPT-2-, Llama 3- and Qwen2-style).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  // The reader takes a path: the input goes to a file of this process's own.
  static const std::string path =
      "/tmp/hotloop-tokenizer-fuzz-" + std::to_string(::getpid()) + ".json";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(
          reinterpret_cast<const char*>(data),
          static_cast<std::streamsize>(size));
  try {
    hotloop::data::Tokenizer t = hotloop::data::Tokenizer::hf(path);
    const std::int64_t vocab = t.vocab_size();
    for (
        const std::int32_t id : t.encode(
            "Hello, w\xc3\xb6rld! 12345 <|endoftext|> \xe6\x9d\xb1\xe4\xba\xac\n\t x")) {
      if (id < 0 || id >= vocab) {
        __builtin_trap();
      }
      (void)t.decode(id);
    }
  } catch (const hotloop::Error&) {
  }
  return 0;
}
