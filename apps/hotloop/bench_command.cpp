// `hotloop bench data`: how fast the input pipeline alone delivers batches.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/bench/data_bench.h"
#include "hotloop/errors.h"

namespace hotloop::cli {

void add_bench_command(CLI::App& app, Action& action) {
  struct Flags {
    bench::DataBenchOptions options;
    std::string split = "train";
    std::string device = "cpu";
    std::string resident = "auto";
    std::string augment = "default";
    std::string augment_device = "cpu";
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* bench_cmd = app.add_subcommand("bench", "Benchmarks");
  bench_cmd->require_subcommand(1);
  CLI::App* cmd = bench_cmd->add_subcommand(
      "data",
      "Run the loader alone (decode + augment + batch + copy) for a while; report images/s and MB/s");
  auto& o = flags->options;
  o.loader.batch_size = 64;
  cmd->add_option(
         "--data",
         o.spec,
         "fashion-mnist[:DIR], folder:DIR, wds:DIR_OR_GLOB, synthetic:N[xCxHxW]")
      ->required();
  cmd->add_option("--split", flags->split, "train, val or test")
      ->check(CLI::IsMember({"train", "val", "test"}));
  cmd->add_option("--batch", o.loader.batch_size, "Batch size");
  cmd->add_option(
      "--workers", o.loader.workers, "Decode threads (0: one per CPU)");
  cmd->add_option(
      "--prefetch", o.loader.prefetch_batches, "Ready batches held ahead");
  cmd->add_option(
      "--size",
      o.loader.size,
      "Output height and width (0: native for fixed-size data, else 224)");
  cmd->add_option("--seconds", o.seconds, "How long to measure");
  cmd->add_option("--device", flags->device, "Where batches go: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--resident", flags->resident, "auto, on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--augment", flags->augment, "default or none")
      ->check(CLI::IsMember({"default", "none"}));
  cmd->add_option(
         "--augment-device",
         flags->augment_device,
         "cpu (decode threads, per sample) or gpu (the whole batch on the device after the copy)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  cmd->add_flag(
      "--decode-only",
      o.decode_only,
      "Only read and decode, the ceiling for the loader (default: off)");
  cmd->add_flag("--json", flags->json, "Print one JSON object (default: off)");
  cmd->callback([flags, &action] {
    action = [flags] {
      auto& opts = flags->options;
      opts.split = data::parse_split(flags->split);
      opts.loader.device = flags->device == "cuda" ? c10::Device(c10::kCUDA, 0)
                                                   : c10::Device(c10::kCPU);
      opts.loader.resident = parse_resident(flags->resident);
      opts.loader.augment = parse_augment(flags->augment);
      opts.loader.augment_on_device = flags->augment_device == "gpu";
      if (opts.seconds <= 0) {
        throw UsageError("--seconds must be positive");
      }
      const bench::DataBenchResult r = bench::bench_data(opts);
      if (flags->json) {
        fmt::print("{}\n", bench::to_json(r).dump(2));
      } else {
        fmt::print(
            "{}\n{}, {} worker(s): {:.0f} images/s, {:.1f} MB/s over {:.1f} s (setup {:.1f} s, waiting {:.0f}%)\n",
            r.source,
            r.mode,
            r.workers,
            r.images_per_s,
            r.mb_per_s,
            r.seconds,
            r.setup_seconds,
            100 * r.wait_fraction);
      }
      return 0;
    };
  });
}

} // namespace hotloop::cli
