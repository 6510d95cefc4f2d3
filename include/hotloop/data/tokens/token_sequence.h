#pragma once
// Token ids as a text or an instruction set becomes them, before they are a
// data set (token_data.h). No LibTorch here, so the fuzz targets build
// without it.

#include <cstdint>
#include <string>
#include <vector>

namespace hotloop::data {

// Token ids of one text or document set, held in memory.
struct TokenSequence {
  std::string name; // for messages
  std::vector<std::uint32_t> ids;
  // Per token, 1 when predicting it is trained (a completion's), 0 when it
  // is context only; empty: every token is trained.
  std::vector<std::uint8_t> trained;
  // Where each example starts (instruction data: one a line), in order from
  // 0; empty: the ids are one text.
  std::vector<std::uint64_t> example_starts;
};

} // namespace hotloop::data
