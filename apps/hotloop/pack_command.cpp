// `hotloop pack`: image folders -> WebDataset shards.

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/core/units.h"
#include "hotloop/data/pack.h"

namespace hotloop::cli {

void add_pack_command(CLI::App& app, Action& action) {
  struct Flags {
    data::PackOptions options;
    std::string shard_size = "256MiB";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "pack",
      "Write image folders as shuffled WebDataset shards per split (OUT/train-000000.tar, ...) + index.json");
  cmd->add_option(
         "--from",
         flags->options.from,
         "Source: folder:DIR with DIR/{train,val,test}/<class>/<image>")
      ->required();
  cmd->add_option("--to", flags->options.out, "Output folder")->required();
  cmd->add_option(
      "--shard-size",
      flags->shard_size,
      "Largest shard (units: KiB MiB GiB, KB MB GB)");
  cmd->add_option("--seed", flags->options.seed, "Shuffle seed");
  cmd->add_flag(
      "--verify",
      flags->options.verify,
      "Re-read every shard and decode every image afterwards; exit 1 on any bad sample (default: off)");
  cmd->footer(
      "Example: hotloop pack --from folder:photos --to shards --verify\nThen train with --data wds:shards.");
  cmd->callback([flags, &action] {
    action = [flags] {
      flags->options.shard_bytes =
          parse_bytes(flags->shard_size, "--shard-size");
      const data::PackResult r = data::pack(flags->options);
      for (const auto& s : r.splits) {
        fmt::print(
            "{}: {} samples, {} in {} shard(s)\n",
            s.split,
            s.samples,
            format_bytes(s.bytes),
            s.shards.size());
      }
      fmt::print(
          "{} classes; index: {}/index.json\n",
          r.classes.size(),
          flags->options.out);
      if (flags->options.verify) {
        fmt::print(
            "verify: {} samples decoded, {} bad\n",
            r.verified,
            r.bad_samples.size());
        for (const auto& bad : r.bad_samples) {
          fmt::print("  bad: {}\n", bad);
        }
        return r.bad_samples.empty() ? 0 : 1;
      }
      return 0;
    };
  });
}

} // namespace hotloop::cli
