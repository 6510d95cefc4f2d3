// `hotloop data check`: read and decode every sample of a data set before
// training on it. `hotloop data batch`: one batch as the loader delivers it,
// to a file (to look at, or to compare with the Python package's).

#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "hotloop/core/named.h"
#include "hotloop/data/data_check.h"
#include "hotloop/data/data_kinds.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/loader.h"
#include "hotloop/model/weights.h"

namespace hotloop::cli {

void add_data_command(CLI::App& app, Action& action) {
  struct Flags {
    std::string spec;
    std::string split = "train";
    bool json = false;
    std::string decode = "full";
    data::DataCheckOptions options;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* data_cmd = app.add_subcommand("data", "Inspect data sets");
  data_cmd->require_subcommand(1);
  CLI::App* cmd = data_cmd->add_subcommand(
      "check",
      "Read and decode every sample of one split; list the bad ones; counts per class and image sizes");
  cmd->add_option(
         "--data", flags->spec, data::data_forms(data::DataFor::Images))
      ->required();
  cmd->add_option("--split", flags->split, "train, val or test")
      ->check(CLI::IsMember({"train", "val", "test"}));
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
  add_json_flag(cmd, flags->json);
  cmd->footer("Exit code: 0 when every sample reads, 1 when any is bad.");
  cmd->callback([flags, &action] {
    action = [flags] {
      const data::Split split = data::parse_split(flags->split);
      const auto dataset =
          data::open_dataset(data::parse_data_spec(flags->spec), split);
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
  cmd->add_option("--split", flags->split, "train, val or test")
      ->check(CLI::IsMember({"train", "val", "test"}))
      ->capture_default_str();
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
