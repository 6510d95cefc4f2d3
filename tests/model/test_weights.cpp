// Weight files through LibTorch: round trips, loading into modules with a
// report of mismatches, and fine-tuning's head replacement and freezing.
#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <torch/utils.h>

#include "hotloop/errors.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/model/model.h"
#include "hotloop/model/weights.h"
#include "support/cli_process.h"
#include "support/file_size_limit.h"
#include "support/temp_dir.h"

#include <filesystem>
#include <fstream>

namespace hotloop::model {
namespace {

std::shared_ptr<Model> make(
    const std::string& name,
    std::int64_t classes,
    std::uint64_t seed) {
  torch::manual_seed(seed);
  return make_model(
      ModelOptions().set_name(name).set_num_classes(classes).set_in_channels(
          1));
}

bool same(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first ||
        a[i].second.scalar_type() != b[i].second.scalar_type() ||
        !at::equal(a[i].second, b[i].second)) {
      return false;
    }
  }
  return true;
}

std::string load_error(Model& m, const StateDict& w) {
  try {
    LoadOptions o;
    o.source = "w.safetensors";
    load_state_dict(m, w, o);
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

} // namespace

TEST(Weights, StateDictRoundTripsBitForBitThroughBothFormats) {
  test::TempDir dir;
  const auto m = make("cnn-small", 10, 1);
  StateDict w = state_dict(*m);
  w.emplace_back(
      "strided",
      at::arange(12, at::kFloat).reshape({3, 4}).t()); // non-contiguous
  w.emplace_back("half", at::arange(5, at::kFloat).to(at::kHalf));
  w.emplace_back("bf16", at::arange(5, at::kFloat).to(at::kBFloat16));
  for (const char* name : {"w.safetensors", "w.pt"}) {
    const std::string path = (dir.path() / name).string();
    write_weights(path, w);
    EXPECT_TRUE(same(read_weights(path), w)) << name;
  }
}

TEST(Weights, StateDictFollowsTorchsOrderAndNames) {
  const auto m = make("cnn-small", 10, 1);
  const StateDict w = state_dict(*m);
  ASSERT_GE(w.size(), 6u);
  EXPECT_EQ(w[0].first, "features.0.weight");
  EXPECT_EQ(w[1].first, "features.1.weight");
  EXPECT_EQ(w[2].first, "features.1.bias");
  EXPECT_EQ(w[3].first, "features.1.running_mean");
  EXPECT_EQ(w.back().first, "fc.bias");
}

TEST(
    Weights,
    StrictLoadListsMissingUnexpectedAndMismatchedKeysAndLoadsNothing) {
  const auto source = make("cnn-small", 10, 1);
  const auto target = make("cnn-small", 5, 2);
  StateDict w = state_dict(*source);
  w.erase(w.begin()); // features.0.weight missing
  w.emplace_back("extra.weight", at::arange(3, at::kFloat));
  const StateDict before = state_dict(*target);
  const std::vector<at::Tensor> before_copy = [&] {
    std::vector<at::Tensor> c;
    for (const auto& [n, t] : before) {
      c.push_back(t.clone());
    }
    return c;
  }();
  const std::string error = load_error(*target, w);
  EXPECT_NE(
      error.find("w.safetensors does not match the model"), std::string::npos)
      << error;
  EXPECT_NE(error.find("missing: features.0.weight"), std::string::npos)
      << error;
  EXPECT_NE(error.find("unexpected: extra.weight"), std::string::npos) << error;
  EXPECT_NE(
      error.find("fc.weight: model [5, 128] vs file [10, 128]"),
      std::string::npos)
      << error;
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(at::equal(before[i].second, before_copy[i]))
        << before[i].first << " changed";
  }

  LoadOptions lenient;
  lenient.strict = false;
  const LoadReport r = load_state_dict(*target, w, lenient);
  EXPECT_EQ(r.missing, std::vector<std::string>{"features.0.weight"});
  EXPECT_EQ(r.unexpected, std::vector<std::string>{"extra.weight"});
  EXPECT_EQ(r.mismatched.size(), 2u); // fc.weight, fc.bias
  EXPECT_TRUE(
      at::equal(state_dict(*target)[1].second, state_dict(*source)[1].second));
}

TEST(Weights, LoadConvertsDtypeIntoTheModulesTensors) {
  const auto source = make("mlp", 10, 1);
  const auto target = make("mlp", 10, 2);
  StateDict w = state_dict(*source);
  for (auto& [n, t] : w) {
    t = t.to(at::kHalf);
  }
  load_state_dict(*target, w);
  for (const auto& [n, t] : state_dict(*target)) {
    EXPECT_EQ(t.scalar_type(), at::kFloat) << n;
  }
  // Half precision keeps ~3 decimal digits.
  EXPECT_TRUE(at::allclose(
      state_dict(*target)[0].second,
      state_dict(*source)[0].second,
      1e-3,
      1e-3));
}

TEST(Weights, AWeightSetThatCannotBeWrittenIsRefusedBeforeTheFileIsTouched) {
  test::TempDir dir;
  const std::string path = (dir.path() / "w.safetensors").string();
  const StateDict w = {{"a", at::arange(4, at::kFloat)}};
  write_weights(path, w);
  const StateDict bad = {
      {"a", at::arange(4, at::kFloat)}, {"a", at::arange(2, at::kFloat)}};
  EXPECT_THROW(write_weights(path, bad), DataError); // duplicate name
  EXPECT_TRUE(same(read_weights(path), w));
  EXPECT_THROW(
      write_weights((dir.path() / "no/such/dir/w.pt").string(), w), DataError);
  EXPECT_EQ(test::count_entries(dir.path()), 1u);
}

// The disk fills up part-way through the write (the temporary file exists
// and holds some bytes): the old file keeps its bytes, the error says what
// failed, and no temporary file is left beside it. Both formats.
TEST(Weights, AWriteThatFailsHalfwayLeavesTheOldFileAndNoTemporaryFile) {
  for (const char* name : {"w.safetensors", "w.pt"}) {
    test::TempDir dir;
    const std::string path = (dir.path() / name).string();
    const StateDict old = {{"a", at::arange(4, at::kFloat)}};
    write_weights(path, old);
    const std::string before = test::slurp(path);
    const StateDict big = {{"a", at::arange(100000, at::kFloat)}}; // 400 KB
    {
      const test::FileSizeLimit full_disk(64 * 1024);
      try {
        write_weights(path, big);
        FAIL() << name << ": a write past the file size limit succeeded";
      } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find("write failed"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
            << e.what();
      }
    }
    EXPECT_EQ(test::slurp(path), before) << name;
    EXPECT_TRUE(same(read_weights(path), old)) << name;
    EXPECT_EQ(test::count_entries(dir.path()), 1u) << name;
  }
}

TEST(FineTune, ANewClassCountReplacesTheHeadAndLoadsTheBackbone) {
  test::TempDir dir;
  const std::string path = (dir.path() / "pretrained.pt").string();
  const auto pretrained = make("resnet18-small", 1000, 1);
  write_weights(path, state_dict(*pretrained));
  const auto model = make("resnet18-small", 5, 2);
  const InitResult r = load_initial_weights(*model, {path, true, {}});
  EXPECT_TRUE(r.head_replaced);
  EXPECT_EQ(r.file_classes, 1000);
  EXPECT_EQ(
      r.report.skipped, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(r.report.loaded.size(), 120u);
  const StateDict got = state_dict(*model);
  const StateDict want = state_dict(*pretrained);
  for (std::size_t i = 0; i + 2 < got.size(); ++i) {
    EXPECT_TRUE(at::equal(got[i].second, want[i].second)) << got[i].first;
  }
  EXPECT_EQ(got.back().second.size(0), 5);

  freeze_backbone(*model);
  const ParameterCount c = count_parameters(*model);
  EXPECT_EQ(c.trainable, 512 * 5 + 5);
  EXPECT_EQ(
      c.frozen,
      11'689'512 - (512 * 1000 + 1000) - 64 * 3 * 7 * 7 + 64 * 1 * 3 * 3);
  const ParameterGroups g = parameter_groups(*model);
  EXPECT_TRUE(g.backbone.empty());
  EXPECT_EQ(g.head.size(), 2u);
  EXPECT_EQ(parse_freeze("backbone"), Freeze::Backbone);
  EXPECT_EQ(parse_freeze("none"), Freeze::None);
}

TEST(
    FineTune,
    FreezeByNameGlobsFreezesWhatMatchesAndNamesAGlobThatMatchesNothing) {
  EXPECT_EQ(parse_freeze("layer1.*"), Freeze::Patterns);
  EXPECT_EQ(
      freeze_patterns("layer1.*,fc.bias"),
      (std::vector<std::string>{"layer1.*", "fc.bias"}));
  EXPECT_THROW(parse_freeze("layer1.*,,fc.bias"), UsageError);
  EXPECT_THROW(parse_freeze(""), UsageError);

  const auto model = make("resnet18-small", 10, 1);
  // `*` crosses dots: layer1.* is every parameter of the first stage.
  const std::size_t n = freeze_matching(*model, {"layer1.*", "fc.bias"});
  std::size_t layer1 = 0;
  for (const auto& p : model->named_parameters()) {
    const bool want_frozen =
        p.key().starts_with("layer1.") || p.key() == "fc.bias";
    layer1 += p.key().starts_with("layer1.");
    EXPECT_EQ(p.value().requires_grad(), !want_frozen) << p.key();
  }
  EXPECT_EQ(n, layer1 + 1);
  try {
    freeze_matching(*model, {"features.*"});
    ADD_FAILURE() << "a glob that matches nothing must be an error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'features.*'"), std::string::npos);
    EXPECT_NE(e.hint().find("conv1.weight"), std::string::npos) << e.hint();
  }
}

TEST(FineTune, SameClassCountWithAnotherModelIsStillAnError) {
  test::TempDir dir;
  const std::string path = (dir.path() / "w.safetensors").string();
  write_weights(path, state_dict(*make("cnn-small", 10, 1)));
  const auto model = make("resnet18-small", 10, 2);
  try {
    load_initial_weights(*model, {path, true, {}});
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("missing: conv1.weight"), std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("--init-strict false"), std::string::npos);
  }
  const InitResult r = load_initial_weights(*model, {path, false, {}});
  EXPECT_FALSE(r.report.complete());
  EXPECT_EQ(r.report.loaded.size(), 0u);
}

} // namespace hotloop::model

namespace hotloop::model {

TEST(Weights, HotloopsSafetensorsCarryAChecksumThatCatchesAFlippedByte) {
  test::TempDir dir;
  const std::string path = (dir.path() / "w.safetensors").string();
  write_weights(path, {{"a", at::arange(64, at::kFloat)}});
  EXPECT_TRUE(read_weight_file(path).metadata.contains("hotloop.crc32"));
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-5, std::ios::end);
  f.put('\x7f');
  f.close();
  try {
    read_weights(path);
    FAIL() << "a corrupt file was read";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("checksum mismatch"), std::string::npos)
        << e.what();
  }
}

} // namespace hotloop::model
