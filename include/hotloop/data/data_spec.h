#pragma once
// `--data SPEC`: which data set to read.
// - fashion-mnist[:DIR]: IDX files (gzip or raw); DIR defaults to
//   /usr/share/datasets/fashion-mnist.
// - folder:DIR: image folders DIR/{train,val,test}/<class>/*.{jpg,png}.
// - wds:DIR or wds:GLOB: WebDataset tar shards (DIR: DIR/<split>-*.tar).
// - synthetic:N[xCxHxW]: N random images (default 3x224x224), 10 classes.
// - tokens:FILE|DIR|GLOB: token files for language models (llm.c .bin shards
//   or nanoGPT's headerless uint16 files; data/token_data.h).
// - text:fortunes|FILE|DIR: text as byte-level tokens, or in the tokens of
//   the model folder's tokenizer when the model's folder has one; fortunes is
//   the built-in corpus (Debian's fortunes package).
// - instruct:FILE|DIR: instruction data, JSON Lines of prompt/completion or
//   messages, tokenized with the model folder's tokenizer
//   (data/instructions.h).

#include <cstdint>
#include <memory>
#include <string>

#include "hotloop/data/dataset.h"
#include "hotloop/data/image_limit.h"

namespace hotloop::data {

struct DataSpec {
  enum class Kind {
    FashionMnist,
    Folder,
    WebDataset,
    Synthetic,
    Tokens,
    Text,
    Instructions
  };
  Kind kind = Kind::FashionMnist;
  std::string path; // folder or glob; empty for synthetic
  std::size_t synthetic_count = 0;
  ImageShape synthetic_shape{3, 224, 224};
  std::string text; // the spec as written, for messages
  // The model's Hugging Face folder, whose tokenizer encodes text and
  // instruction data; empty: the model has none (text is bytes). The caller
  // sets it.
  std::string tokenizer_folder;
  // Instruction data's chat template (data/tokens/instructions.h): auto,
  // folder, chatml, llama3 or plain. The caller sets it.
  std::string chat_template = "auto";
  // Folders and shards: images whose header claims more pixels are bad
  // samples (data/image_limit.h). The caller sets it.
  std::int64_t max_image_pixels = kDefaultMaxImagePixels;
};

// Throws UsageError naming the spec and the forms that are accepted.
DataSpec parse_data_spec(const std::string& text);

// Opens one split. Validates the data before returning (a bad file fails here,
// not at step N). Throws DataError for unreadable or invalid data, UsageError
// for a format not built yet.
std::unique_ptr<Dataset> open_dataset(
    const DataSpec& spec,
    Split split,
    std::uint64_t seed = 0);

} // namespace hotloop::data
