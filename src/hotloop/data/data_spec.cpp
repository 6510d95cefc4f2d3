#include "hotloop/data/data_spec.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "hotloop/data/fashion_mnist.h"
#include "hotloop/data/image_folder.h"
#include "hotloop/data/instructions.h"
#include "hotloop/data/synthetic.h"
#include "hotloop/data/token_data.h"
#include "hotloop/data/tokenizer.h"
#include "hotloop/data/webdataset.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

constexpr const char* kForms =
    "fashion-mnist[:DIR], folder:DIR, wds:DIR_OR_GLOB, synthetic:N or synthetic:NxCxHxW, tokens:FILE_DIR_OR_GLOB, text:fortunes or text:FILE_OR_DIR, instruct:FILE_OR_DIR (JSON Lines)";

UsageError bad_spec(const std::string& text, const std::string& why) {
  return UsageError(
      fmt::format("bad --data '{}': {}", text, why),
      fmt::format("accepted forms: {}", kForms));
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
  if (kind == "fashion-mnist") {
    spec.kind = DataSpec::Kind::FashionMnist;
    spec.path = rest.empty() ? FashionMnist::kDefaultDir : rest;
  } else if (
      kind == "folder" || kind == "wds" || kind == "tokens" || kind == "text" ||
      kind == "instruct") {
    if (rest.empty()) {
      throw bad_spec(text, kind + " needs a path");
    }
    spec.kind = kind == "folder" ? DataSpec::Kind::Folder
        : kind == "wds"          ? DataSpec::Kind::WebDataset
        : kind == "tokens"       ? DataSpec::Kind::Tokens
        : kind == "text"         ? DataSpec::Kind::Text
                                 : DataSpec::Kind::Instructions;
    spec.path = rest;
  } else if (kind == "synthetic") {
    if (rest.empty()) {
      throw bad_spec(text, "synthetic needs a count");
    }
    const auto dims = parse_dims(text, rest);
    if (dims.size() != 1 && dims.size() != 4) {
      throw bad_spec(text, "synthetic takes N or NxCxHxW");
    }
    spec.kind = DataSpec::Kind::Synthetic;
    spec.synthetic_count = static_cast<std::size_t>(dims[0]);
    if (dims.size() == 4) {
      spec.synthetic_shape = {dims[1], dims[2], dims[3]};
    }
  } else {
    throw bad_spec(text, fmt::format("unknown data source '{}'", kind));
  }
  return spec;
}

std::unique_ptr<Dataset> open_dataset(
    const DataSpec& spec,
    Split split,
    std::uint64_t seed) {
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
      return std::make_unique<ImageFolder>(spec.path, split);
    case DataSpec::Kind::WebDataset:
      return std::make_unique<WebDataset>(spec.path, split);
    case DataSpec::Kind::Tokens: {
      auto tokens = TokenDataset::open_files(
          token_files(spec.path, split),
          fmt::format("tokens:{} {}", spec.path, to_string(split)));
      if (const auto dir = Tokenizer::dir_beside(spec.path)) {
        tokens->set_tokenizer_vocabulary(Tokenizer::in_dir(*dir).vocab_size());
      }
      return tokens;
    }
    case DataSpec::Kind::Text:
      return open_text(spec.path, split, spec.tokenizer_folder);
    case DataSpec::Kind::Instructions:
      return open_instructions(spec.path, split, spec.tokenizer_folder);
  }
  throw UsageError(fmt::format("--data '{}': unknown kind", spec.text));
}

} // namespace hotloop::data
