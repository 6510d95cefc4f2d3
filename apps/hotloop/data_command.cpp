// `hotloop data check`: read and decode every sample of a data set before
// training on it. `hotloop data batch`: one batch as the loader delivers it,
// to a file (to look at, or to compare with the Python package's).
// `hotloop data show`: one example of token data as the model sees it.

#include <algorithm>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "hotloop/core/named.h"
#include "hotloop/data/data_check.h"
#include "hotloop/data/data_kinds.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/loader.h"
#include "hotloop/data/tokens/instructions.h"
#include "hotloop/data/tokens/packing.h"
#include "hotloop/data/tokens/token_data.h"
#include "hotloop/data/tokens/token_view.h"
#include "hotloop/data/tokens/tokenizer.h"
#include "hotloop/model/weights.h"
#include "run_option_flags.h"

namespace hotloop::cli {

namespace {

// --split, as every data subcommand takes it.
void add_split_option(CLI::App* cmd, std::string& split) {
  cmd->add_option("--split", split, "train, val or test")
      ->check(CLI::IsMember({"train", "val", "test"}))
      ->capture_default_str();
}

// --init and --chat-template: the model folder that tokenizes instruction
// data (and text), and the chat template it renders conversations with.
void add_folder_options(
    CLI::App* cmd,
    std::string& init,
    std::string& chat_template) {
  cmd->add_option(
      "--init",
      init,
      "The model's Hugging Face folder: its tokenizer (instruct: needs one; text: is in its tokens with it, else bytes)");
  cmd->add_option(
         "--chat-template",
         chat_template,
         std::string("instruct:'s chat template: ") + data::kChatTemplateNames +
             " (auto: the folder's own where it has one)")
      ->check([](const std::string& t) {
        try {
          data::parse_chat_template(t);
          return std::string();
        } catch (const UsageError&) {
          return std::string("expected ") + data::kChatTemplateNames;
        }
      })
      ->capture_default_str();
}

// What `data check` says of token data: reading it read (and, for
// instruction data, rendered and tokenized) every example.
struct TokenSummary {
  std::string source;
  std::uint64_t tokens = 0;
  std::uint64_t trained = 0;
  std::size_t examples = 0;
  std::uint64_t longest = 0;
};
TokenSummary summarize(const data::TokenDataset& d) {
  TokenSummary s{d.describe(), d.size(), 0, 0, 0};
  for (const auto& shard : d.shards()) {
    s.trained += shard.trained == nullptr
        ? shard.count
        : static_cast<std::uint64_t>(
              std::count(shard.trained, shard.trained + shard.count, 1));
  }
  if (d.has_examples()) {
    const std::vector<data::TokenSpan> spans = d.examples();
    s.examples = spans.size();
    for (const auto& span : spans) {
      s.longest = std::max(s.longest, span.count);
    }
  }
  return s;
}

// What `data check` prints of token data: every example was read.
void print_token_check(const TokenSummary& t, bool json) {
  if (json) {
    fmt::print(
        "{}\n",
        nlohmann::json{
            {"source", t.source},
            {"tokens", t.tokens},
            {"trained_tokens", t.trained},
            {"examples", t.examples},
            {"longest_example", t.longest},
            {"bad", nlohmann::json::array()}}
            .dump(2));
    return;
  }
  fmt::print(
      "{}\n{} tokens, {} trained{}; every one read\n",
      t.source,
      t.tokens,
      t.trained,
      t.examples > 0
          ? fmt::format(
                "; {} examples, the longest {} tokens", t.examples, t.longest)
          : std::string());
}

// The tokenizer that decodes `spec`'s ids: the model folder's, the one
// `pack --tokenizer` left beside token files, else bytes.
data::Tokenizer tokenizer_for(
    const data::DataSpec& spec,
    const std::string& folder) {
  if (!folder.empty()) {
    return data::Tokenizer::in_dir(folder);
  }
  if (spec.kind == data::DataSpec::Kind::Tokens) {
    if (const auto dir = data::Tokenizer::dir_beside(spec.path)) {
      return data::Tokenizer::in_dir(*dir);
    }
  }
  return data::Tokenizer::bytes();
}

} // namespace

void add_data_command(CLI::App& app, Action& action) {
  struct Flags {
    std::string spec;
    std::string split = "train";
    std::string init;
    std::string chat_template = "auto";
    bool json = false;
    std::string decode = "full";
    data::DataCheckOptions options;
    train::RunOptions run; // --max-image-pixels, as train has it
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* data_cmd = app.add_subcommand("data", "Inspect data sets");
  data_cmd->require_subcommand(1);
  CLI::App* cmd = data_cmd->add_subcommand(
      "check",
      "Read and decode every sample of one split; list the bad ones; counts per class and image sizes (token data: read, rendered and tokenized, with its counts)");
  cmd->add_option(
         "--data", flags->spec, data::data_forms(data::DataFor::Images))
      ->required();
  add_split_option(cmd, flags->split);
  add_folder_options(cmd, flags->init, flags->chat_template);
  cmd->add_option(
      "--threads",
      flags->options.threads,
      "Decode threads (0: one per usable CPU)");
  cmd->add_option(
         "--decode",
         flags->decode,
         "full: decode every image whole (the check). auto or region: also run each JPEG through the loader's crop decode (that --decode) and report its PSNR against a full decode with the same crop")
      ->capture_default_str();
  cmd->add_option(
         "--size",
         flags->options.size,
         "With --decode auto|region: the crop's output size")
      ->capture_default_str();
  add_run_flags(cmd, flags->run, {"max-image-pixels"});
  add_json_flag(cmd, flags->json);
  cmd->footer("Exit code: 0 when every sample reads, 1 when any is bad.");
  cmd->callback([flags, &action] {
    action = [flags] {
      const data::Split split = data::parse_split(flags->split);
      data::DataSpec spec = data::parse_data_spec(flags->spec);
      spec.tokenizer_folder = flags->init;
      spec.chat_template = flags->chat_template;
      spec.max_image_pixels = flags->run.trainer.loader.max_image_pixels;
      const auto dataset = data::open_dataset(spec, split);
      if (const auto* tokens =
              dynamic_cast<const data::TokenDataset*>(dataset.get())) {
        print_token_check(summarize(*tokens), flags->json);
        return 0;
      }
      flags->options.progress = !flags->json;
      flags->options.decode = parse_named<data::Decode>(
          data::kDecodeNames, flags->decode, "decode");
      if (flags->options.size <= 0) {
        throw UsageError("--size must be positive");
      }
      const data::DataCheckReport r =
          data::check_dataset(*dataset, flags->options);
      if (flags->json) {
        fmt::print("{}\n", data::to_json(r).dump(2));
      } else {
        fmt::print(
            "{}\n{} samples checked in {:.1f} s, {} bad\n",
            r.source,
            r.samples,
            r.seconds,
            r.bad.size());
        for (std::size_t c = 0; c < r.classes.size(); ++c) {
          fmt::print("  {:>6}  {}\n", r.per_class[c], r.classes[c]);
        }
        fmt::print(
            "image sizes: {}x{} to {}x{} ({} channel(s))\n",
            r.min_shape.height,
            r.min_shape.width,
            r.max_shape.height,
            r.max_shape.width,
            r.max_shape.channels);
        if (r.decode) {
          fmt::print(
              "decode {} against full: {} JPEGs ({} as regions, {} scaled), PSNR min {:.1f} dB, median {:.1f} dB (100: identical)\n",
              flags->decode,
              r.decode->images,
              r.decode->regions,
              r.decode->scaled,
              r.decode->psnr_min,
              r.decode->psnr_median);
        }
        for (const auto& b : r.bad) {
          fmt::print("  bad #{}: {}\n", b.index, b.error);
        }
      }
      return r.bad.empty() ? 0 : 1;
    };
  });
  add_data_batch_command(*data_cmd, action);
  add_data_show_command(*data_cmd, action);
}

// `data show`: one example (or window) of token data as the model sees it.
void add_data_show_command(CLI::App& data_cmd, Action& action) {
  struct Flags {
    std::string spec;
    std::string init;
    std::string chat_template = "auto";
    std::string split = "train";
    std::size_t index = 0;
    std::int64_t context = 64;
    bool json = false;
    bool no_color = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = data_cmd.add_subcommand(
      "show",
      "Print one example of instruction data (or one window of other token data) as the model sees it: the text with its trained part marked, or with --json its token ids, pieces and trained flags");
  cmd->add_option(
         "--data", flags->spec, data::data_forms(data::DataFor::Tokens))
      ->required();
  add_folder_options(cmd, flags->init, flags->chat_template);
  add_split_option(cmd, flags->split);
  cmd->add_option(
         "--index",
         flags->index,
         "Which example (instruct:) or window (tokens:, text:)")
      ->capture_default_str();
  cmd->add_option(
         "--context",
         flags->context,
         "tokens:, text:: a window's tokens less one (the model's context)")
      ->capture_default_str();
  add_json_flag(cmd, flags->json);
  add_no_color_flag(cmd, flags->no_color);
  cmd->footer(
      "The trained part is what the loss counts (an answer and its end marker). Exit code: 0 when shown, 1 when the data cannot be read, 2 for bad usage.");
  cmd->callback([flags, &action] {
    action = [flags] {
      data::DataSpec spec = data::parse_data_spec(flags->spec);
      spec.tokenizer_folder = flags->init;
      spec.chat_template = flags->chat_template;
      const std::shared_ptr<const data::Dataset> dataset =
          data::open_dataset(spec, data::parse_split(flags->split));
      const auto* tokens =
          dynamic_cast<const data::TokenDataset*>(dataset.get());
      if (tokens == nullptr) {
        throw UsageError(
            fmt::format("--data {}: not token data", flags->spec),
            "data show reads instruct:, text: and tokens:; data batch writes an image batch");
      }
      const data::Tokenizer tokenizer = tokenizer_for(spec, flags->init);
      const data::TokenView view =
          data::view_tokens(*tokens, tokenizer, flags->index, flags->context);
      if (flags->json) {
        fmt::print(
            "{}\n",
            data::to_json(view).dump(
                2, ' ', false, nlohmann::json::error_handler_t::replace));
        return 0;
      }
      const bool color = !flags->no_color && stdout_wants_color();
      fmt::print(
          "{}: {} tokens, {} trained ({})\n{}\n",
          view.what,
          view.ids.size(),
          std::count(view.trained.begin(), view.trained.end(), true),
          color ? "in green" : "between [[ and ]]",
          data::marked_text(
              view, color ? "\033[32m" : "[[", color ? "\033[0m" : "]]"));
      return 0;
    };
  });
}

void add_data_batch_command(CLI::App& data_cmd, Action& action) {
  struct Flags {
    std::string spec;
    std::string split = "train";
    std::string out;
    std::string decode = "auto";
    std::string augment = "default";
    bool eval = false;
    std::size_t index = 0;
    std::size_t epoch = 0;
    data::LoaderOptions options;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = data_cmd.add_subcommand(
      "batch",
      "Write one batch as the loader delivers it (decoded, augmented, normalized) to a safetensors file: 'images' and 'labels'");
  cmd->add_option("--data", flags->spec, "A data spec, as train's --data")
      ->required();
  add_split_option(cmd, flags->split);
  cmd->add_option("--out", flags->out, "The file to write (.safetensors)")
      ->required();
  cmd->add_option("--batch-size", flags->options.batch_size, "Samples")
      ->capture_default_str();
  cmd->add_option(
         "--seed",
         flags->options.seed,
         "The order's and the augmentation's seed")
      ->capture_default_str();
  cmd->add_option("--epoch", flags->epoch, "Which epoch")
      ->capture_default_str();
  cmd->add_option("--index", flags->index, "Which batch of the epoch")
      ->capture_default_str();
  cmd->add_option(
         "--size",
         flags->options.size,
         "Output size (0: the data set's; photos: 224)")
      ->capture_default_str();
  cmd->add_option(
         "--decode", flags->decode, "auto, region or full (JPEG photos)")
      ->capture_default_str();
  cmd->add_option("--augment", flags->augment, "default or none")
      ->capture_default_str();
  cmd->add_flag(
      "--eval",
      flags->eval,
      "The eval transform, in order (else training's augmentation, shuffled)");
  cmd->add_option(
         "--workers",
         flags->options.workers,
         "Decode threads (0: one per usable CPU)")
      ->capture_default_str();
  cmd->footer(
      "Exit code: 0 when the batch was written, 1 when the data cannot be read, 2 for bad usage.");
  cmd->callback([flags, &action] {
    action = [flags] {
      data::LoaderOptions o = flags->options;
      o.train = !flags->eval;
      o.shuffle = o.train;
      o.drop_last = o.train;
      o.decode = parse_named<data::Decode>(
          data::kDecodeNames, flags->decode, "decode");
      o.augment = parse_named<data::Augment>(
          data::kAugmentNames, flags->augment, "augment");
      const std::shared_ptr<const data::Dataset> dataset = data::open_dataset(
          data::parse_data_spec(flags->spec),
          data::parse_split(flags->split),
          o.seed);
      const auto loader = data::make_loader(dataset, o);
      if (flags->index >= loader->batches_per_epoch()) {
        throw UsageError(fmt::format(
            "--index {}: an epoch has {} batches of {}",
            flags->index,
            loader->batches_per_epoch(),
            o.batch_size));
      }
      loader->start_epoch(flags->epoch, flags->index);
      const std::optional<data::Batch> b = loader->next();
      model::write_weights(
          flags->out,
          {{"images", b->images.contiguous()},
           {"labels", b->labels.contiguous()}});
      fmt::print(
          "{}: batch {} of epoch {}: images {}, labels {}\n",
          flags->out,
          flags->index,
          flags->epoch,
          fmt::join(b->images.sizes(), "x"),
          b->labels.numel());
      return 0;
    };
  });
}

} // namespace hotloop::cli
