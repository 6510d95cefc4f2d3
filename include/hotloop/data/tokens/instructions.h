#pragma once
// Instruction data (`--data instruct:FILE|DIR`): JSON Lines, one example per
// line, tokenized with the model folder's tokenizer, packed into windows,
// with the loss only on what the model is to answer.
//
// A line and how it becomes tokens: data/tokens/instruction_encoder.h.
//
// Splits. A file: its val counterpart (the name with "train" as "val") when
// it exists, else the last 10% of its examples (none below 10 examples). A
// folder: its *.jsonl files, by name ("train", "val", "test") when some are
// so named, else all of them as one file.
//
// Errors: a DataError "FILE:LINE: what" for a line the encoder refuses, or
// one of more than 64 MiB.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hotloop/data/tokens/instruction_encoder.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/errors.h"

namespace hotloop::data {

// The split asked for is not in the data (a missing split, not a bad one).
class NoSuchSplit : public DataError {
 public:
  using DataError::DataError;
};

// `instruct:PATH`'s `split`, tokenized with `folder`'s tokenizer (the model's
// Hugging Face folder). UsageError without a folder; DataError for a missing
// split or a bad line.
std::unique_ptr<TokenDataset> open_instructions(
    const std::string& path,
    Split split,
    const std::string& folder,
    std::optional<ChatTemplate> chat_template = std::nullopt);

} // namespace hotloop::data
