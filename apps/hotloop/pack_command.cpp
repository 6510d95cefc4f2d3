// `hotloop pack`: image folders -> WebDataset shards, or text -> llm.c token
// shards (--text).

#include <fmt/format.h>

#include "cli_common.h"
#include "hotloop/core/units.h"
#include "hotloop/data/sources/pack.h"
#include "hotloop/data/tokens/pack_text.h"
#include "hotloop/errors.h"

namespace hotloop::cli {

void add_pack_command(CLI::App& app, Action& action) {
  struct Flags {
    data::PackOptions options;
    std::string shard_size = "256MiB";
    data::PackTextOptions text;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "pack",
      "Write image folders as shuffled WebDataset shards per split (OUT/train-000000.tar, ...) + index.json, or text as llm.c token shards (--text)");
  cmd->add_option(
      "--from",
      flags->options.from,
      "Images: folder:DIR with DIR/{train,val,test}/<class>/<image>");
  cmd->add_option(
      "--text",
      flags->text.inputs,
      "Text files or folders -> OUT/text_{train,val}_000000.bin (llm.c format; each file's last tenth is val)");
  cmd->add_option(
         "--tokenizer",
         flags->text.tokenizer,
         "--text: bytes (vocabulary 256), bpe:DIR (GPT-2's byte-level BPE: DIR/vocab.json + DIR/merges.txt) or hf:DIR (a Hugging Face tokenizer.json: Llama 3, Qwen2; past 65536 tokens the shards hold uint32 ids, in llm.c's Llama 3 format); its files are copied into OUT")
      ->capture_default_str();
  cmd->add_option(
      "--shard-tokens",
      flags->text.shard_tokens,
      "--text: tokens per shard (llm.c's 100M)");
  cmd->add_option("--to", flags->options.out, "Output folder")->required();
  cmd->add_option(
      "--shard-size",
      flags->shard_size,
      "Largest shard (units: KiB MiB GiB, KB MB GB)");
  cmd->add_option("--seed", flags->options.seed, "Shuffle seed");
  cmd->add_option(
         "--max-side",
         flags->options.image.max_side,
         "Images: resize each image whose longer side is larger to this many pixels (antialiased) and store it as a JPEG; smaller ones are kept at their size. 0: resize none; e.g. 512 for training at 224 px")
      ->capture_default_str();
  cmd->add_option(
         "--quality",
         flags->options.image.quality,
         "--max-side: the JPEG quality of a resized image (1-100)")
      ->capture_default_str();
  cmd->add_option(
         "--restart-markers",
         flags->options.image.restart_markers,
         "Images: write each JPEG with a restart marker per row of blocks (those kept at their size rewritten losslessly: the same pixels) so a crop's decode starts at the row above it; false: copy JPEGs byte for byte")
      ->type_name("[true|false]")
      ->default_str("true");
  cmd->add_flag(
      "--verify",
      flags->options.verify,
      "Re-read every shard and decode every image afterwards; exit 1 on any bad sample (default: off)");
  cmd->footer(
      "Examples:\n"
      "  hotloop pack --from folder:photos --to shards --verify   (then --data wds:shards)\n"
      "  hotloop pack --from folder:photos --to shards --max-side 512   (photos at training size)\n"
      "  hotloop pack --text books/ --to tokens                  (then --model gpt-nano --data tokens:tokens)\n"
      "  hotloop pack --text books/ --tokenizer bpe:gpt2/ --to tokens   (GPT-2's tokens; --vocab follows)");
  cmd->callback([flags, &action] {
    action = [flags] {
      if (flags->options.from.empty() == flags->text.inputs.empty()) {
        throw UsageError(
            "pack: give one of --from (images) or --text (text)",
            "hotloop pack --help shows both");
      }
      if (!flags->text.inputs.empty()) {
        flags->text.out = flags->options.out;
        const data::PackTextResult r = data::pack_text(flags->text);
        fmt::print(
            "{} file(s), {} of text in {:.1f} s ({:.1f} MB/s): {} train and {} val tokens (vocabulary {}) in {} shard(s) in {}\n",
            r.files,
            format_bytes(r.bytes),
            r.seconds,
            r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e6
                          : 0.0,
            r.train_tokens,
            r.val_tokens,
            r.vocab,
            r.shards.size(),
            flags->options.out);
        return 0;
      }
      flags->options.shard_bytes =
          parse_bytes(flags->shard_size, "--shard-size");
      const data::PackResult r = data::pack(flags->options);
      for (const auto& s : r.splits) {
        fmt::print(
            "{}: {} samples ({} resized, {} rewritten with restart markers), {} in {} shard(s)\n",
            s.split,
            s.samples,
            s.resized,
            s.remarked,
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
