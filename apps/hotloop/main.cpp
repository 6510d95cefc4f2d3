// hotloop: get neural-network training onto NVIDIA GPUs and keep it fast.
// The only place that turns library exceptions into messages and exit codes:
// 0 success, 1 failure, 2 bad usage.

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli_common.h"
#include "config_file.h"
#include "host_allocator.h"
#include "hotloop/cuda/build_info.h"
#include "hotloop/errors.h"
#include "hotloop/train/host_memory.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

void print_error(const hotloop::Error& e) {
  fmt::print(stderr, "hotloop: error: {}\n", e.what());
  if (!e.hint().empty()) {
    fmt::print(stderr, "hotloop: hint: {}\n", e.hint());
  }
}

} // namespace

int main(int argc, char** argv) {
  hotloop::cli::configure_host_allocator();
  hotloop::train::count_host_memory_if_asked();
  CLI::App app{
      "hotloop: get neural-network training onto NVIDIA GPUs and keep it fast",
      "hotloop"};
  // Later values win: a --config file's keys are placed before the command
  // line's flags (config_file.h).
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  app.set_version_flag(
      "--version",
      [] { return hotloop::format_build_info(hotloop::build_info()); },
      "Print the version, git commit, LibTorch and CUDA/cuDNN/NCCL versions, and exit");
  app.footer(
      "Run `hotloop COMMAND --help` for a command's flags. Exit codes: 0 ok, 1 failure, 2 bad usage.");

  hotloop::cli::Action action;
  hotloop::cli::add_doctor_command(app, action);
  hotloop::cli::add_run_command(app, action);
  hotloop::cli::add_smoke_command(app, action);
  hotloop::cli::add_audit_command(app, action);
  hotloop::cli::add_data_command(app, action);
  hotloop::cli::add_bench_command(app, action);
  hotloop::cli::add_pack_command(app, action);
  hotloop::cli::add_train_command(app, action);
  hotloop::cli::add_tune_command(app, action);
  hotloop::cli::add_plan_command(app, action);
  hotloop::cli::add_monitor_command(app, action);
  hotloop::cli::add_watch_command(app, action);
  hotloop::cli::add_launch_command(app, action);
  hotloop::cli::add_predict_command(app, action);
  hotloop::cli::add_generate_command(app, action);
  hotloop::cli::add_weights_command(app, action);
  hotloop::cli::add_inspect_command(app, action);

  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    args = hotloop::cli::expand_config_file(app, std::move(args));
    std::reverse(args.begin(), args.end()); // CLI11 takes them last first
    app.parse(args);
  } catch (const hotloop::UsageError& e) {
    print_error(e);
    return kExitUsage;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    std::fputs(e.what(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    // `hotloop watch python train.py --lr 1`: the job's flags were taken for
    // watch's.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && argc > 1 &&
        std::string(argv[1]) == "watch" &&
        std::find(argv + 2, argv + argc, std::string("--")) == argv + argc) {
      std::fputs(
          "hotloop: hint: put -- before the job's command: hotloop watch [OPTIONS] -- CMD ARGS...\n",
          stderr);
    }
    return kExitUsage;
  }

  try {
    return action();
  } catch (const hotloop::UsageError& e) {
    print_error(e);
    return kExitUsage;
  } catch (const hotloop::Error& e) {
    print_error(e);
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "hotloop: internal error: {}\n", e.what());
    return kExitFailure;
  }
}
