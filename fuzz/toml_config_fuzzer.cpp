// libFuzzer target for `--config FILE.toml` (apps/hotloop/config_file.h,
// toml++): any file must become flags of the command, or a ConfigError naming
// the file; never a crash, a stack overflow or a huge allocation. What it
// returns is the command, then `--KEY=VALUE` (or `--KEY` and an empty value)
// for keys the command has (CLI11 gives each a --help), then the command line's
// own arguments. Built and run by fuzz/run, seeded with fuzz/seeds/toml_config.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "config_file.h"
#include "hotloop/errors.h"

namespace {

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

struct Command {
  CLI::App app{"fuzz"};
  int micro_batch = 0;
  double lr = 0;
  std::string name;
  bool compile = false;
  std::string config;
  std::string keys;
  Command() {
    CLI::App* train = app.add_subcommand("train");
    train->add_option("--micro-batch", micro_batch);
    train->add_option("--lr", lr);
    train->add_option("--name", name);
    train->add_flag("--compile", compile);
    train->add_option("--config", config);
    train->add_option("--config-keys", keys);
  }
};

bool known(const std::string& arg) {
  for (const char* key :
       {"--micro-batch",
        "--lr",
        "--name",
        "--compile",
        "--config-keys",
        "--help"}) {
    const std::string k(key);
    if (arg == k || arg.starts_with(k + "=")) {
      return true;
    }
  }
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(
    const std::uint8_t* data,
    std::size_t size) {
  static Command command;
  // The reader takes a path: the input goes to a file of this process's own.
  static const std::string path =
      "/tmp/hotloop-toml-fuzz-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(
          reinterpret_cast<const char*>(data),
          static_cast<std::streamsize>(size));
  try {
    const std::vector<std::string> args = hotloop::cli::expand_config_file(
        command.app, {"train", "--config", path, "--lr=1"});
    check(
        args.size() >= 2 && args.front() == "train" && args.back() == "--lr=1");
    for (std::size_t i = 1; i + 1 < args.size(); ++i) {
      if (args[i].find('=') == std::string::npos) { // `--KEY` then ""
        check(known(args[i]) && i + 2 < args.size() && args[i + 1].empty());
        ++i;
      } else {
        check(known(args[i]));
      }
    }
  } catch (const hotloop::ConfigError&) {
  }
  return 0;
}
