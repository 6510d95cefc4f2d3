#include "hotloop/data/data_spec.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "hotloop/data/data_kinds.h"
#include "hotloop/data/eval_split.h"
#include "hotloop/data/sources/fashion_mnist.h"
#include "hotloop/data/sources/image_folder.h"
#include "hotloop/data/sources/synthetic.h"
#include "hotloop/data/sources/webdataset.h"
#include "hotloop/data/tokens/instructions.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

using K = DataSpec::Kind;
constexpr DataKind kKinds[] = {
    {K::FashionMnist,
     "fashion-mnist",
     "fashion-mnist[:DIR]",
     "28x28 gray images in IDX files (DIR: /usr/share/datasets/fashion-mnist)",
     false,
     false},
    {K::Folder,
     "folder",
     "folder:DIR",
     "images in DIR/{train,val,test}/<class>/",
     false,
     true},
    {K::WebDataset,
     "wds",
     "wds:DIR|GLOB",
     "images in WebDataset tar shards (DIR: DIR/<split>-*.tar)",
     false,
     true},
    {K::Synthetic,
     "synthetic",
     "synthetic:N[xCxHxW]",
     "N random images (3x224x224 by default), 10 classes",
     false,
     true},
    {K::Tokens,
     "tokens",
     "tokens:FILE|DIR|GLOB",
     "token ids: llm.c .bin shards or nanoGPT's uint16 files",
     true,
     true},
    {K::Text,
     "text",
     "text:fortunes|FILE|DIR",
     "text, as bytes or in the model folder's tokens; fortunes: the built-in corpus",
     true,
     true},
    {K::Instructions,
     "instruct",
     "instruct:FILE|DIR",
     "JSON Lines of prompt/completion or messages; the loss on the answers",
     true,
     true},
};

UsageError bad_spec(const std::string& text, const std::string& why) {
  return UsageError(
      fmt::format("bad --data '{}': {}", text, why),
      fmt::format("accepted forms: {}", data_forms()));
}

// "1000x3x32x32" -> {1000, 3, 32, 32}; every part a positive integer.
std::vector<std::int64_t> parse_dims(
    const std::string& text,
    const std::string& dims) {
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (start <= dims.size()) {
    const std::size_t end = std::min(dims.find('x', start), dims.size());
    std::int64_t v = 0;
    const char* first = dims.data() + start;
    const char* last = dims.data() + end;
    const auto [ptr, ec] = std::from_chars(first, last, v);
    if (first == last || ec != std::errc() || ptr != last || v <= 0) {
      throw bad_spec(
          text,
          fmt::format(
              "'{}' is not a positive integer", std::string(first, last)));
    }
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

} // namespace

std::span<const DataKind> data_kinds() {
  return kKinds;
}

const DataKind& data_kind(DataSpec::Kind kind) {
  for (const DataKind& k : kKinds) {
    if (k.kind == kind) {
      return k;
    }
  }
  throw std::logic_error("a DataSpec::Kind without its entry in kKinds");
}

std::string data_forms(DataFor which) {
  std::string out;
  for (const DataKind& k : kKinds) {
    if (which == DataFor::Any || k.tokens == (which == DataFor::Tokens)) {
      out += (out.empty() ? "" : ", ") + std::string(k.form);
    }
  }
  return out;
}

const char* to_string(Split split) {
  switch (split) {
    case Split::Train:
      return "train";
    case Split::Val:
      return "val";
    case Split::Test:
      return "test";
  }
  return "?";
}

Split parse_split(const std::string& name) {
  for (const Split s : {Split::Train, Split::Val, Split::Test}) {
    if (name == to_string(s)) {
      return s;
    }
  }
  throw UsageError(
      fmt::format("unknown split '{}'", name), "use train, val or test");
}

DataSpec parse_data_spec(const std::string& text) {
  DataSpec spec;
  spec.text = text;
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string rest =
      colon == std::string::npos ? std::string() : text.substr(colon + 1);
  const auto entry = std::find_if(
      std::begin(kKinds), std::end(kKinds), [&](const DataKind& k) {
        return kind == k.prefix;
      });
  if (entry == std::end(kKinds)) {
    throw bad_spec(text, fmt::format("unknown data source '{}'", kind));
  }
  if (entry->needs_path && rest.empty()) {
    throw bad_spec(
        text,
        kind == "synthetic" ? std::string("synthetic needs a count")
                            : kind + " needs a path");
  }
  spec.kind = entry->kind;
  spec.path = rest;
  if (spec.kind == DataSpec::Kind::FashionMnist && rest.empty()) {
    spec.path = FashionMnist::kDefaultDir;
  } else if (spec.kind == DataSpec::Kind::Synthetic) {
    const auto dims = parse_dims(text, rest);
    if (dims.size() != 1 && dims.size() != 4) {
      throw bad_spec(text, "synthetic takes N or NxCxHxW");
    }
    spec.path.clear();
    spec.synthetic_count = static_cast<std::size_t>(dims[0]);
    if (dims.size() == 4) {
      spec.synthetic_shape = {dims[1], dims[2], dims[3]};
    }
  }
  return spec;
}

std::unique_ptr<Dataset> open_dataset(
    const DataSpec& spec,
    Split split,
    std::uint64_t seed) {
  if (spec.max_image_pixels < 1 ||
      spec.max_image_pixels > kLargestMaxImagePixels) {
    throw UsageError(fmt::format(
        "max image pixels {}: must be 1 to {} (65535 x 65535)",
        spec.max_image_pixels,
        kLargestMaxImagePixels));
  }
  switch (spec.kind) {
    case DataSpec::Kind::FashionMnist:
      return std::make_unique<FashionMnist>(spec.path, split);
    case DataSpec::Kind::Synthetic: {
      SyntheticOptions o;
      o.count = spec.synthetic_count;
      o.shape = spec.synthetic_shape;
      o.seed = seed * 3 +
          static_cast<std::uint64_t>(split); // each split its own images
      return std::make_unique<Synthetic>(o);
    }
    case DataSpec::Kind::Folder:
      return std::make_unique<ImageFolder>(
          spec.path, split, DecodeOptions{3, spec.max_image_pixels});
    case DataSpec::Kind::WebDataset:
      return std::make_unique<WebDataset>(
          spec.path, split, DecodeOptions{3, spec.max_image_pixels});
    case DataSpec::Kind::Tokens: {
      auto tokens = TokenDataset::open_files(
          token_files(spec.path, split),
          fmt::format("tokens:{} {}", spec.path, to_string(split)));
      if (const auto dir = Tokenizer::dir_beside(spec.path)) {
        const Tokenizer tokenizer = Tokenizer::in_dir(*dir);
        tokens->set_tokenizer_vocabulary(tokenizer.vocab_size());
        tokens->set_tokenizer_files(tokenizer.files());
        tokens->set_end_of_text(tokenizer.end_of_text());
      }
      return tokens;
    }
    case DataSpec::Kind::Text:
      return open_text(spec.path, split, spec.tokenizer_folder);
    case DataSpec::Kind::Instructions:
      return open_instructions(
          spec.path,
          split,
          spec.tokenizer_folder,
          parse_chat_template(spec.chat_template));
  }
  throw UsageError(fmt::format("--data '{}': unknown kind", spec.text));
}

std::shared_ptr<const Dataset> open_eval_split(
    const DataSpec& spec,
    std::uint64_t seed) {
  for (const Split split : {Split::Val, Split::Test}) {
    try {
      return open_dataset(spec, split, seed);
    } catch (const NoSuchSplit&) {
      // Instruction data without this split: try the next.
    } catch (const DataError&) {
      if (spec.kind == DataSpec::Kind::Instructions) {
        throw;
      }
    }
  }
  return nullptr;
}

} // namespace hotloop::data
