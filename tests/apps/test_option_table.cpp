// The option table (train/option_table.h, train/run_options.h) read by
// everything that shows or keeps an option: each test walks the whole table,
// so an option left out of --help, the TOML config, config.json or the
// resume check fails here by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/testplan/matrix.h"
#include "hotloop/train/checkpointer.h"
#include "hotloop/train/run_options.h"
#include "support/cli_process.h"
#include "support/temp_dir.h"

namespace hotloop {
namespace {

using test::run_cli;

// What `hotloop train --help` shows as an option's default.
std::string shown_default(const train::RunOption& o) {
  const std::string text = o.text(train::RunOptions{});
  return text.empty() ? "\"\"" : text;
}

nlohmann::json read_json(const std::filesystem::path& p) {
  return nlohmann::json::parse(test::slurp(p));
}

// A value of `o` other than its value in `t`, valid for its range.
std::string another_value(
    const train::TrainerOption& o,
    const train::TrainerOptions& t) {
  const nlohmann::json v = o.get(t);
  switch (o.kind) {
    case train::OptionKind::Choice:
      for (const auto& c : o.choices) {
        if (c != v.get<std::string>()) {
          return c;
        }
      }
      break;
    case train::OptionKind::Boolean:
      return v.get<bool>() ? "false" : "true";
    case train::OptionKind::Integer:
      return std::to_string(v.get<std::int64_t>() + 1);
    case train::OptionKind::Real: {
      const double d = v.get<double>();
      return fmt::format("{}", d == 0 ? 0.5 : d / 2);
    }
    case train::OptionKind::Text:
      // --device takes only device names, --document-mask off, eos or an id,
      // --chat-template a template's name, --offload none or optimizer.
      if (o.name == "device") {
        return "cpu";
      }
      if (o.name == "document-mask") {
        return "eos";
      }
      if (o.name == "chat-template") {
        return "chatml";
      }
      if (o.name == "offload") {
        return "optimizer";
      }
      return v.get<std::string>() + "-changed";
  }
  return {};
}

TEST(OptionTable, NamesAreUniqueAndEveryEntryCanPrintAndParseItsDefault) {
  std::set<std::string> names;
  const train::RunOptions defaults;
  for (const train::RunOption& o : train::run_options()) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name << " twice";
    EXPECT_FALSE(o.help.empty()) << o.name;
    EXPECT_FALSE(o.section.empty()) << o.name;
    // Its default printed and parsed back is its default.
    train::RunOptions back;
    o.set(back, o.text(defaults));
    EXPECT_EQ(o.get(back), o.get(defaults)) << o.name;
    EXPECT_EQ(o.check(defaults), "") << o.name;
  }
  // Every trainer option is a run option, under the same name.
  for (const train::TrainerOption& o : train::trainer_options()) {
    EXPECT_NE(train::find_run_option(o.name), nullptr) << o.name;
  }
}

TEST(OptionTable, EveryOptionIsInHelpWithItsDefault) {
  const auto help = run_cli("train --help");
  ASSERT_EQ(help.exit_code, 0) << help.out;
  for (const train::RunOption& o : train::run_options()) {
    const auto at = help.out.find("\n  --" + o.name + " ");
    ASSERT_NE(at, std::string::npos) << "--" << o.name << " not in --help";
    const auto end = help.out.find("\n  --", at + 1);
    const std::string entry = help.out.substr(at, end - at);
    EXPECT_NE(
        entry.find("[default: " + shown_default(o) + "]"), std::string::npos)
        << entry;
  }
}

// Every option as a TOML key (at its default, with a small run's data and
// length): the run accepts each, and config.json records each with its
// value and "config file" as its source.
TEST(OptionTable, EveryOptionIsATomlKeyAndConfigJsonRecordsItWithItsSource) {
  test::TempDir dir;
  const auto run = dir.path() / "run";
  train::RunOptions r;
  r.data = "synthetic:64x1x28x28";
  r.trainer.model.name = "mlp";
  r.trainer.steps = 1;
  r.trainer.batch = 16;
  r.trainer.threads = 1;
  r.trainer.out_dir = run.string();
  r.eval = false;
  std::string toml;
  for (const train::RunOption& o : train::run_options()) {
    toml += fmt::format("{} = {}\n", o.name, o.get(r).dump());
  }
  const auto file = dir.write("all.toml", toml);
  const auto result = run_cli("train --config " + file.string());
  ASSERT_EQ(result.exit_code, 0) << toml << result.out;
  const auto config = read_json(run / "config.json");
  for (const train::RunOption& o : train::run_options()) {
    ASSERT_TRUE(config["options"].contains(o.name)) << o.name;
    EXPECT_EQ(config["sources"][o.name], "config file") << o.name;
    if (o.name != "num-classes" && o.name != "in-channels") { // the data's
      EXPECT_EQ(config["options"][o.name], o.get(r)) << o.name;
    }
  }
}

// --print-config's TOML fed back with --config trains a run whose
// config.json holds the same options (every value; only the sources say
// "config file" now), model and batch split as the run it was printed for.
TEST(OptionTable, PrintConfigRoundTripsThroughConfig) {
  test::TempDir dir;
  const std::string run = (dir.path() / "run").string();
  const std::string flags =
      "train --model cnn-small --data synthetic:96x1x28x28 --steps 3 "
      "--batch 16 --micro-batch 8 --threads 1 --no-eval --seed 5 --out " +
      run;
  const auto printed = run_cli(flags + " --print-config", {}, false);
  ASSERT_EQ(printed.exit_code, 0) << printed.out;
  EXPECT_NE(printed.out.find("lr = 0.003  # recipe"), std::string::npos)
      << printed.out;
  EXPECT_NE(printed.out.find("seed = 5  # flag"), std::string::npos)
      << printed.out;
  EXPECT_FALSE(std::filesystem::exists(run)) << "--print-config trained";
  const auto toml = dir.write("printed.toml", printed.out);

  const auto from_file = run_cli("train --config " + toml.string());
  ASSERT_EQ(from_file.exit_code, 0) << from_file.out;
  nlohmann::json again = read_json(run + "/config.json");
  std::filesystem::remove_all(run);
  const auto from_flags = run_cli(flags);
  ASSERT_EQ(from_flags.exit_code, 0) << from_flags.out;
  nlohmann::json first = read_json(run + "/config.json");
  for (const auto& [name, source] : again["sources"].items()) {
    EXPECT_EQ(source, "config file") << name;
  }
  again.erase("sources");
  first.erase("sources");
  EXPECT_EQ(again, first) << "first:\n"
                          << first.dump(1) << "\nagain:\n"
                          << again.dump(1);
}

// A bench row and `hotloop train` with the row's flags resolve the same way
// (recipe, data fit, batch): the same options, sources and model.
TEST(OptionTable, ABenchRowAndTheSameTrainCommandResolveIdentically) {
  test::TempDir dir;
  testplan::MatrixOptions m;
  m.rows = {{"cpu", "fp32", 16, "resnet18-small", "synthetic:64x1x16x16"}};
  m.steps = 2;
  m.threads = 1;
  m.eval_samples = 16;
  m.grow_gpu_batch = false;
  m.out_dir = (dir.path() / "bench").string();
  const auto rows = testplan::run_matrix(m);
  ASSERT_EQ(rows.size(), 1U);
  ASSERT_EQ(rows[0].status, "ok") << rows[0].reason;
  nlohmann::json row = read_json(rows[0].run_dir + "/config.json");

  std::string args = "train";
  for (const auto& [name, value] : testplan::row_train_flags(m.rows[0], m)) {
    args += " --" + name + "=" + value;
  }
  std::filesystem::remove_all(rows[0].run_dir);
  const auto trained = run_cli(args);
  ASSERT_EQ(trained.exit_code, 0) << args << "\n" << trained.out;
  nlohmann::json cli = read_json(rows[0].run_dir + "/config.json");
  // Each run lists its own callbacks (a row records its figures itself).
  row.erase("callbacks");
  cli.erase("callbacks");
  EXPECT_EQ(row, cli) << "row:\n" << row.dump(1) << "\ntrain:\n" << cli.dump(1);
  EXPECT_EQ(row["sources"]["lr"], "recipe");
}

// Each option the table marks kept_on_resume, changed, is named by the
// resume check; any other option changed is not.
TEST(OptionTable, EveryMustMatchOptionRefusesAResumeWithAnotherValue) {
  train::TrainerOptions base;
  base.model.name = "resnet18-small";
  const nlohmann::json saved = base.to_json();
  int must_match = 0;
  for (const train::TrainerOption& o : train::trainer_options()) {
    train::TrainerOptions changed = base;
    const std::string value = another_value(o, base);
    o.set(changed, value);
    ASSERT_NE(o.get(changed), o.get(base)) << o.name;
    const auto diff = train::differing_options(saved, changed);
    const bool named =
        std::any_of(diff.begin(), diff.end(), [&](const std::string& d) {
          return d.starts_with(o.name + ":");
        });
    EXPECT_EQ(named, o.must_match) << o.name << " = " << value;
    if (!o.must_match) {
      // Nor through the model as built (its figures come from must-match
      // options).
      EXPECT_TRUE(diff.empty()) << o.name << ": " << diff.front();
    }
    must_match += o.must_match ? 1 : 0;
  }
  EXPECT_GT(must_match, 30);
}

} // namespace
} // namespace hotloop
