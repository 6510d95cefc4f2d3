// `hotloop bench`: the test plan's matrix of short training runs and its
// report (testplan/matrix.h, testplan/report.h); `hotloop bench data`: how fast
// the input pipeline alone delivers batches; `hotloop bench conv`: oneDNN
// against im2col + GEMM per convolution shape on the CPU (--cpu-conv).

#include <fmt/format.h>

#include "bench_matrix.h"
#include "cli_common.h"
#include "hotloop/errors.h"
#include "hotloop/model/model_kind.h"
#include "hotloop/testplan/conv_bench.h"
#include "hotloop/testplan/data_bench.h"
#include "matrix_file.h"
#include "run_option_flags.h"

namespace hotloop::cli {

namespace {

// `hotloop bench`: the matrix of short training runs.
CLI::App* add_bench_matrix(CLI::App& app, Action& action) {
  struct MatrixFlags {
    testplan::MatrixOptions options;
    train::RunOptions run; // --model, --data, --steps, --threads
    std::string matrix;
    std::string out = "runs/bench";
  };
  auto mf = std::make_shared<MatrixFlags>();
  mf->run.trainer.model.name = "resnet18-small";
  mf->run.trainer.steps = mf->options.steps;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench",
      "The test plan: a matrix of short training runs (device x precision x batch, then larger GPU batches up to the first OOM), with report.md, report.html and results.json");
  bench_cmd->require_subcommand(0, 1);
  auto& mo = mf->options;
  bench_cmd
      ->add_option(
          "--matrix",
          mf->matrix,
          "A TOML file choosing the rows ([matrix] devices/precisions/batches/models/data, or [[rows]])")
      ->check(CLI::ExistingFile);
  // Each row's model, data, steps and threads: `hotloop train`'s flags.
  add_run_flags(bench_cmd, mf->run, {"model", "data", "steps", "threads"});
  bench_cmd->add_option("--out", mf->out, "Where the report goes")
      ->capture_default_str();
  bench_cmd
      ->add_option(
          "--cpu-row-seconds",
          mo.cpu_row_seconds,
          "A CPU row stops after this many seconds (0: all its steps); the row says how many it ran")
      ->capture_default_str();
  bench_cmd
      ->add_option(
          "--grow-gpu-batch",
          mo.grow_gpu_batch,
          "After the rows, doubling GPU batches until the first out-of-memory")
      ->capture_default_str();
  bench_cmd
      ->add_option(
          "--eval-samples",
          mo.eval_samples,
          "Validation images per row (evenly spaced over the held-out split)")
      ->capture_default_str();
  bench_cmd->footer(
      "Every row: the same model, data, seed and steps. GPU rows are 'skipped: no GPU' without one.\n"
      "Example:\n  hotloop bench --steps 100 --cpu-row-seconds 60 --out runs/bench\n"
      "Exit code: 0 when the report is written (rows that fail say why in it); 2 for a bad matrix file.");
  bench_cmd->callback([bench_cmd, mf, &action] {
    if (bench_cmd->got_subcommand("data") ||
        bench_cmd->got_subcommand("conv")) {
      return; // the subcommand set its own action
    }
    action = [mf, bench_cmd] {
      const train::RunOptions& run = mf->run;
      mf->options.steps = run.trainer.steps;
      mf->options.threads = run.trainer.threads;
      if (mf->options.steps < 1) {
        throw UsageError("--steps must be at least 1");
      }
      // A language model without --data gets the built-in corpus.
      const std::string& model = run.trainer.model.name;
      mf->options.rows = testplan::default_matrix(
          model,
          model::model_kind(model).language_model() &&
                  bench_cmd->count("--data") == 0
              ? std::string("text:fortunes")
              : run.data);
      if (!mf->matrix.empty()) {
        // The file's settings, then the flags given on the command line
        // win over them (as with --config).
        const testplan::MatrixOptions given = mf->options;
        read_matrix_file(mf->matrix, mf->options);
        if (bench_cmd->count("--steps") > 0) {
          mf->options.steps = given.steps;
        }
        if (bench_cmd->count("--cpu-row-seconds") > 0) {
          mf->options.cpu_row_seconds = given.cpu_row_seconds;
        }
        if (bench_cmd->count("--grow-gpu-batch") > 0) {
          mf->options.grow_gpu_batch = given.grow_gpu_batch;
        }
      }
      mf->options.out_dir = mf->out;
      run_and_report_matrix(mf->options);
      return 0;
    };
  });
  return bench_cmd;
}

// `hotloop bench data`: the loader alone.
void add_bench_data(CLI::App* bench_cmd, Action& action) {
  struct Flags {
    testplan::DataBenchOptions options;
    train::RunOptions run; // the loader's flags, as `hotloop train` has them
    std::string split = "train";
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = bench_cmd->add_subcommand(
      "data",
      "Run the loader alone (decode + augment + batch + copy) for a while; report images/s and MB/s");
  auto& o = flags->options;
  flags->run.trainer.device = "cpu";
  flags->run.data.clear();
  add_run_flags(
      cmd,
      flags->run,
      {"data",
       "batch",
       "workers",
       "prefetch",
       "size",
       "device",
       "resident",
       "augment",
       "augment-device",
       "decode",
       "decode-device",
       "max-image-pixels"});
  cmd->get_option("--data")->required();
  cmd->add_option("--split", flags->split, "train, val or test")
      ->check(CLI::IsMember({"train", "val", "test"}));
  cmd->add_option("--seconds", o.seconds, "How long to measure");
  cmd->add_flag(
      "--decode-only",
      o.decode_only,
      "Only read and decode, the ceiling for the loader (default: off)");
  add_json_flag(cmd, flags->json);
  cmd->callback([flags, &action] {
    action = [flags] {
      auto& opts = flags->options;
      const train::TrainerOptions& t = flags->run.trainer;
      opts.spec = flags->run.data;
      opts.split = data::parse_split(flags->split);
      opts.loader = t.loader; // workers, prefetch, size, augment, resident
      opts.loader.batch_size = static_cast<std::size_t>(t.batch);
      opts.loader.device = t.device == "auto" || t.device == "cpu"
          ? c10::Device(c10::kCPU)
          : c10::Device(t.device == "cuda" ? "cuda:0" : t.device);
      if (opts.seconds <= 0) {
        throw UsageError("--seconds must be positive");
      }
      const testplan::DataBenchResult r = testplan::bench_data(opts);
      if (flags->json) {
        fmt::print("{}\n", testplan::to_json(r).dump(2));
      } else {
        fmt::print(
            "{}\n{}, decode {}, {} worker(s): {:.0f} images/s, {:.1f} MB/s over {:.1f} s (setup {:.1f} s, waiting {:.0f}%)\n",
            r.source,
            r.mode,
            r.decode,
            r.workers,
            r.images_per_s,
            r.mb_per_s,
            r.seconds,
            r.setup_seconds,
            100 * r.wait_fraction);
        if (opts.loader.decode_on_device) {
          fmt::print(
              "{}\nnvJPEG decoded {} files; {} went back to the CPU\n",
              r.feed,
              r.gpu_decoded,
              r.gpu_fallbacks);
        }
      }
      return 0;
    };
  });
}

// `hotloop bench conv`: oneDNN against im2col + GEMM per convolution shape.
void add_bench_conv(CLI::App* bench_cmd, Action& action) {
  struct ConvFlags {
    testplan::ConvBenchOptions options;
    bool json = false;
  };
  auto cf = std::make_shared<ConvFlags>();
  CLI::App* conv_cmd = bench_cmd->add_subcommand(
      "conv",
      "Time each convolution shape of a ResNet -small on the CPU, forward + backward, through oneDNN and through im2col + GEMM, and show which one --cpu-conv auto takes");
  conv_cmd->add_option("--batch", cf->options.batch, "Batch size")
      ->capture_default_str();
  conv_cmd
      ->add_option(
          "--size", cf->options.size, "Input height and width, in pixels")
      ->capture_default_str();
  conv_cmd
      ->add_option(
          "--threads",
          cf->options.threads,
          "Intra-op threads (0: the usable cores)")
      ->capture_default_str();
  conv_cmd
      ->add_option(
          "--repeats",
          cf->options.repeats,
          "Timed passes per shape and algorithm (the median counts)")
      ->capture_default_str();
  add_json_flag(conv_cmd, cf->json);
  conv_cmd->footer(
      "Shapes: the -small stem's stages at S, S/2, S/4, S/8 pixels (64..512 channels), with each stage's strided entry and 1x1 downsample.\n"
      "Example:\n  hotloop bench conv --batch 64 --size 28 --threads 2\n"
      "Exit code: 0; 2 for a bad option.");
  conv_cmd->callback([cf, &action] {
    action = [cf] {
      const testplan::ConvBenchResult r = testplan::bench_conv(cf->options);
      fmt::print(
          "{}",
          cf->json ? testplan::to_json(r).dump(2) + "\n" : testplan::render(r));
      return 0;
    };
  });
}

} // namespace

void add_bench_command(CLI::App& app, Action& action) {
  CLI::App* bench_cmd = add_bench_matrix(app, action);
  add_bench_data(bench_cmd, action);
  add_bench_conv(bench_cmd, action);
}

} // namespace hotloop::cli
