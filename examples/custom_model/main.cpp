// Your own model, dataset and callback, trained by hotloop: the same loop,
// precision, accumulation, checkpoints and resume as `hotloop train`.
//
//   custom_model [RUN_DIR]     trains for 3 epochs, logging the gradient norm
//                              every 20 steps, prints the validation accuracy,
//                              exits 0 when it is at least 90% and the
//                              callback logged
//
// The data: 16x16 gray images of stripes, horizontal (class 0) or vertical
// (class 1), with a random phase, period and noise.

#include <cmath>
#include <cstdio>
#include <random>

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/flatten.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/norm.h>
#include <ATen/ops/relu.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include "hotloop/data/dataset.h"
#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/standard_callbacks.h"
#include "hotloop/train/trainer.h"

namespace {

// A model is a torch::nn::Module with forward(images) -> logits, a head, and
// (optionally) its own loss.
class TinyNet : public hotloop::model::Model {
 public:
  TinyNet()
      : conv_(register_module(
            "conv",
            torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)))),
        fc_(register_module("fc", torch::nn::Linear(8 * 8 * 8, 2))) {}
  at::Tensor forward(const at::Tensor& images) override {
    // (B, 1, 16, 16) -> (B, 8, 8, 8) -> (B, 2)
    return fc_(at::flatten(at::max_pool2d(at::relu(conv_(images)), {2, 2}), 1));
  }
  // Its own objective, in place of the default cross-entropy: focal loss
  // (Lin et al. 2017, gamma 2), which weighs the samples the model still
  // gets wrong. hotloop's steps, evaluation and smoke all call it.
  at::Tensor loss(
      const at::Tensor& logits,
      const at::Tensor& labels,
      const hotloop::model::LossOptions& options) const override {
    const at::Tensor log_p = logits.to(at::kFloat)
                                 .log_softmax(1)
                                 .gather(1, labels.unsqueeze(1))
                                 .squeeze(1);
    const at::Tensor per_sample = -(1 - log_p.exp()).pow(2) * log_p;
    return options.reduction == at::Reduction::Sum ? per_sample.sum()
                                                   : per_sample.mean();
  }

 private:
  torch::nn::Conv2d conv_;
  torch::nn::Linear fc_;
};

// A dataset is a size and item i -> (uint8 image (C, H, W), label), made on
// the fly here; get() must be thread-safe (the loader's threads call it).
class Stripes : public hotloop::data::Dataset {
 public:
  Stripes(std::size_t size, std::uint64_t seed) : size_(size), seed_(seed) {}
  std::size_t size() const override {
    return size_;
  }
  hotloop::data::Sample get(std::size_t index) const override {
    std::mt19937_64 rng(seed_ * 1000003 + index);
    const std::int64_t label = static_cast<std::int64_t>(index % 2);
    const double period = std::uniform_real_distribution<double>(3, 6)(rng);
    const double phase = std::uniform_real_distribution<double>(0, 6.28)(rng);
    std::normal_distribution<double> noise(0, 20);
    at::Tensor image = at::empty({1, 16, 16}, at::kByte);
    auto* px = image.data_ptr<std::uint8_t>();
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 16; ++x) {
        const double t = label == 0 ? y : x;
        const double v =
            128 + 90 * std::sin(6.283 * t / period + phase) + noise(rng);
        px[y * 16 + x] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
    return {image, label};
  }
  const std::vector<std::string>& class_names() const override {
    return names_;
  }
  std::optional<hotloop::data::ImageShape> shape() const override {
    return hotloop::data::ImageShape{1, 16, 16};
  }
  std::string describe() const override {
    return "stripes: " + std::to_string(size_) +
        " generated 16x16 images, 2 classes";
  }

 private:
  std::size_t size_;
  std::uint64_t seed_;
  std::vector<std::string> names_{"horizontal", "vertical"};
};

// A callback observes the run at the loop's events (hotloop/train/callback.h)
// and never changes it. on_gradients comes when a step's gradients are final
// (averaged across ranks, unscaled), before clipping and the update.
class GradNormLogger : public hotloop::train::Callback {
 public:
  explicit GradNormLogger(std::int64_t every) : every_(every) {}
  std::string name() const override {
    return "grad-norm-logger";
  }
  void on_gradients(const hotloop::train::RunState& s) override {
    if ((s.step + 1) % every_ != 0) {
      return;
    }
    double squares = 0; // reads each gradient back: every N steps, not each
    for (const auto& p : s.model->parameters()) {
      if (p.grad().defined()) {
        const double n = p.grad().norm().item<double>();
        squares += n * n;
      }
    }
    std::printf(
        "step %lld: gradient norm %.4f\n",
        static_cast<long long>(s.step + 1),
        std::sqrt(squares));
    ++logged_;
  }
  // What a callback returns at the end lands in summary.json under its name.
  nlohmann::json on_fit_end(
      const hotloop::train::RunState&,
      const hotloop::train::TrainSummary&) override {
    return {{"lines", logged_}};
  }
  int logged() const {
    return logged_;
  }

 private:
  std::int64_t every_;
  int logged_ = 0;
};

} // namespace

int main(int argc, char** argv) {
  try {
    hotloop::train::TrainerOptions options;
    options.model.name = "tiny-net"; // recorded in config.json
    options.model.image.in_channels = 1;
    options.model.image.num_classes = 2;
    options.epochs = 3;
    options.batch = 32;
    options.device = "auto";
    options.optimizer.kind = hotloop::train::OptimizerKind::AdamW;
    options.schedule.lr = 3e-3;
    options.loader.augment = hotloop::data::Augment::None;
    options.loader.mean = {0.5f};
    options.loader.std = {0.25f};
    options.out_dir = argc > 1 ? argv[1] : "runs/custom_model";

    torch::manual_seed(0);
    auto model = std::make_shared<TinyNet>();
    // hotloop's own callbacks (console, metrics file, telemetry,
    // TensorBoard), then ours.
    auto grad_norms = std::make_shared<GradNormLogger>(20);
    hotloop::train::TrainerContext context;
    context.callbacks.push_back(grad_norms);
    hotloop::train::Trainer trainer(
        model,
        std::make_shared<Stripes>(1024, 1),
        std::make_shared<Stripes>(256, 2),
        options,
        context);
    const hotloop::train::TrainSummary s = trainer.fit();
    const double accuracy = s.eval ? s.eval->accuracy : 0.0;
    std::printf(
        "custom_model: %lld steps, validation accuracy %.1f%%\n",
        static_cast<long long>(s.steps),
        100 * accuracy);
    return accuracy >= 0.9 && grad_norms->logged() > 0 ? 0 : 1;
  } catch (const hotloop::Error& e) {
    std::fprintf(stderr, "custom_model: %s\n", e.what());
    return 1;
  }
}
