// `hotloop train` on image folders as users run it: fine-tuning a trained
// model (head replaced, backbone frozen, its own head learning rate), and a
// folder with real corrupt JPEG and PNG files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>

#include "hotloop/train/checkpoint_file.h"
#include "support/cli_process.h"
#include "support/image_files.h"
#include "support/temp_dir.h"
#include "test_paths.h"

namespace hotloop {

using test::run_to_end;

// The source documents' worked example in small: a model trained on one data
// set (10 classes) fine-tuned on a 3-class image folder, head replaced,
// backbone frozen, its own LR for the head.
TEST(TrainCli, FineTuningFromACheckpointReplacesTheHeadAndFreezesTheBackbone) {
  test::TempDir dir;
  const std::string log = (dir.path() / "log").string();
  const auto pre = (dir.path() / "pre").string();
  ASSERT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY,
           "train",
           "--data",
           "synthetic:64x3x16x16",
           "--model",
           "cnn-small",
           "--steps",
           "2",
           "--batch",
           "16",
           "--out",
           pre,
           "--threads",
           "1"},
          log),
      0)
      << test::slurp(log);
  for (const char* split : {"train", "val"}) {
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 8; ++i) {
        const auto px = test::flat_image(
            16,
            16,
            {static_cast<std::uint8_t>(60 * c),
             90,
             static_cast<std::uint8_t>(20 * i)});
        test::write_bytes(
            dir.path() / "photos" / split / fmt::format("class{}", c) /
                fmt::format("{}.jpg", i),
            test::jpeg_bytes(px, 16, 16, 3));
      }
    }
  }
  const std::string checkpoint =
      (std::filesystem::path(pre) / "checkpoints" / "step-00000002.safetensors")
          .string();
  ASSERT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY,
           "train",
           "--data",
           "folder:" + (dir.path() / "photos").string(),
           "--size",
           "16",
           "--model",
           "cnn-small",
           "--init",
           checkpoint,
           "--freeze",
           "backbone",
           "--lr",
           "0.01",
           "--head-lr",
           "0.1",
           "--steps",
           "3",
           "--batch",
           "8",
           "--out",
           (dir.path() / "ft").string(),
           "--threads",
           "1"},
          log),
      0)
      << test::slurp(log);
  const std::string out = test::slurp(log);
  EXPECT_NE(
      out.find(
          "the head 'fc' was replaced: the file has 10 classes, the model 3"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("parameters: 387 trainable"), std::string::npos)
      << out; // 128 x 3 + 3
  // After 3 steps the backbone's parameters are the checkpoint's, bit for
  // bit, and the new head has moved. (BatchNorm's running statistics are
  // buffers, not parameters: they follow the new data, as in PyTorch with
  // requires_grad off.)
  const auto init = train::load_checkpoint(checkpoint).model;
  const auto tuned = train::load_checkpoint((dir.path() / "ft" / "checkpoints" /
                                             "step-00000003.safetensors")
                                                .string())
                         .model;
  ASSERT_EQ(init.size(), tuned.size());
  int backbone = 0;
  for (std::size_t i = 0; i < init.size(); ++i) {
    ASSERT_EQ(init[i].first, tuned[i].first);
    if (init[i].first.starts_with("fc.")) {
      EXPECT_NE(init[i].second.sizes(), tuned[i].second.sizes());
      continue;
    }
    if (init[i].first.find("running_") != std::string::npos ||
        init[i].first.find("num_batches") != std::string::npos) {
      continue;
    }
    ++backbone;
    EXPECT_TRUE(at::equal(init[i].second, tuned[i].second)) << init[i].first;
  }
  EXPECT_EQ(backbone, 8); // cnn-small's backbone parameter tensors
  // A file for another model stops before training, listing the keys.
  EXPECT_EQ(
      run_to_end(
          {HOTLOOP_TEST_BINARY,
           "train",
           "--data",
           "synthetic:64x3x16x16",
           "--model",
           "resnet18-small",
           "--init",
           checkpoint,
           "--steps",
           "1",
           "--out",
           (dir.path() / "bad").string()},
          log),
      1);
  EXPECT_NE(test::slurp(log).find("missing: conv1.weight"), std::string::npos)
      << test::slurp(log);
}

// --head-lr is the head's learning rate, --lr the backbone's: with one of
// them 1e-30 (plain SGD, constant schedule, no weight decay; a learning rate
// must be positive) that part of the model keeps its weights to within 1e-20
// and the other moves.
TEST(TrainCli, HeadLrTrainsTheHeadAndLrTheBackbone) {
  test::TempDir dir;
  const std::string log = (dir.path() / "log").string();
  auto run = [&](const std::string& name, const char* lr, const char* head_lr) {
    const std::string out = (dir.path() / name).string();
    EXPECT_EQ(
        run_to_end(
            {HOTLOOP_TEST_BINARY,
             "train",
             "--data",
             "synthetic:64x1x16x16",
             "--model",
             "cnn-small",
             "--optimizer",
             "sgd",
             "--momentum",
             "0",
             "--weight-decay",
             "0",
             "--schedule",
             "constant",
             "--lr",
             lr,
             "--head-lr",
             head_lr,
             "--steps",
             "2",
             "--checkpoint-every",
             "1",
             "--batch",
             "16",
             "--threads",
             "1",
             "--out",
             out},
            log),
        0)
        << test::slurp(log);
    const auto dir_path = std::filesystem::path(out) / "checkpoints";
    return std::make_pair(
        train::load_checkpoint(
            (dir_path / "step-00000001.safetensors").string())
            .model,
        train::load_checkpoint(
            (dir_path / "step-00000002.safetensors").string())
            .model);
  };
  // Whether each parameter moved between step 1 and step 2 (BatchNorm's
  // running statistics move with any batch: not parameters, left out).
  auto moved = [](const auto& pair, bool head) {
    bool any = false;
    bool all_same = true;
    for (std::size_t i = 0; i < pair.first.size(); ++i) {
      const std::string& name = pair.first[i].first;
      if (name.find("running_") != std::string::npos ||
          name.find("num_batches") != std::string::npos ||
          name.starts_with("fc.") != head) {
        continue;
      }
      const bool same =
          at::allclose(pair.first[i].second, pair.second[i].second, 0, 1e-20);
      any = any || !same;
      all_same = all_same && same;
    }
    return std::make_pair(any, all_same);
  };
  const auto head_only = run("head", "1e-30", "0.1");
  EXPECT_TRUE(moved(head_only, true).first);
  EXPECT_TRUE(moved(head_only, false).second); // backbone unchanged
  const auto backbone_only = run("backbone", "0.1", "1e-30");
  EXPECT_TRUE(moved(backbone_only, false).first);
  EXPECT_TRUE(moved(backbone_only, true).second); // head unchanged
}

// A folder of real image files, three of them broken the ways files break:
// a JPEG cut short, a PNG whose compressed data was overwritten, and a text
// file with a .jpg name. Skip: the run trains on the rest, warns once per
// file and counts them in summary.json. Fail: it stops naming the first.
TEST(TrainCli, CorruptJpegAndPngFilesAreSkippedAndCountedOrStopTheRun) {
  test::TempDir dir;
  const auto photos = dir.path() / "photos";
  for (const char* split : {"train", "val"}) {
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 6; ++i) {
        const auto px = test::flat_image(
            16,
            16,
            {static_cast<std::uint8_t>(100 * c),
             static_cast<std::uint8_t>(30 * i),
             90});
        test::write_bytes(
            photos / split / fmt::format("class{}", c) /
                fmt::format("{}.{}", i, i % 2 == 0 ? "jpg" : "png"),
            i % 2 == 0 ? test::jpeg_bytes(px, 16, 16, 3)
                       : test::png_bytes(px, 16, 16, 3));
      }
    }
  }
  const auto noise = test::flat_image(16, 16, {7, 8, 9});
  std::vector<std::uint8_t> cut = test::jpeg_bytes(noise, 16, 16, 3);
  cut.resize(cut.size() * 2 / 3);
  test::write_bytes(photos / "train" / "class0" / "cut.jpg", cut);
  std::vector<std::uint8_t> png = test::png_bytes(noise, 16, 16, 3);
  for (std::size_t i = png.size() / 2; i < png.size() / 2 + 8; ++i) {
    png[i] ^= 0xff;
  }
  test::write_bytes(photos / "train" / "class1" / "garbled.png", png);
  const std::string text = "this is not an image\n";
  test::write_bytes(
      photos / "train" / "class1" / "notes.jpg",
      std::vector<std::uint8_t>(text.begin(), text.end()));

  const std::string log = (dir.path() / "log").string();
  auto train = [&](const char* policy, const std::string& out) {
    return run_to_end(
        {HOTLOOP_TEST_BINARY,
         "train",
         "--data",
         "folder:" + photos.string(),
         "--size",
         "16",
         "--model",
         "cnn-small",
         "--epochs",
         "1",
         "--batch",
         "5",
         "--threads",
         "1",
         "--on-bad-sample",
         policy,
         "--out",
         out},
        log);
  };
  // 15 files in train: one epoch of 3 batches reads every one once.
  ASSERT_EQ(train("skip", (dir.path() / "skip").string()), 0)
      << test::slurp(log);
  const std::string out = test::slurp(log);
  for (const char* name : {"cut.jpg", "garbled.png", "notes.jpg"}) {
    EXPECT_NE(
        out.find(
            std::string("skipping a bad sample: ") +
            (photos / "train").string()),
        std::string::npos)
        << out;
    EXPECT_NE(out.find(name), std::string::npos) << name << "\n" << out;
  }
  const auto s =
      nlohmann::json::parse(test::slurp(dir.path() / "skip" / "summary.json"));
  EXPECT_EQ(s["bad_samples"], 3) << s.dump();
  EXPECT_EQ(s["steps"], 3);

  EXPECT_EQ(train("fail", (dir.path() / "fail").string()), 1)
      << test::slurp(log);
  const std::string failed = test::slurp(log);
  EXPECT_TRUE(
      failed.find("cut.jpg") != std::string::npos ||
      failed.find("garbled.png") != std::string::npos ||
      failed.find("notes.jpg") != std::string::npos)
      << failed;
  EXPECT_NE(failed.find("hotloop: error:"), std::string::npos) << failed;
}

} // namespace hotloop
