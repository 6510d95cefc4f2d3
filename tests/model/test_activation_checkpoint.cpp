// Activation checkpointing gives the gradients of the plain backward.
#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/utils.h>

#include "hotloop/errors.h"
#include "hotloop/model/model.h"

namespace hotloop::model {
namespace {

// The gradient of every parameter after one forward/backward in `mode`.
std::vector<at::Tensor> gradients(
    Model& m,
    Checkpointing mode,
    const at::Tensor& x,
    const at::Tensor& y) {
  m.set_checkpointing(mode);
  m.zero_grad();
  at::cross_entropy_loss(m.forward(x), y).backward();
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) {
    out.push_back(p.grad().clone());
  }
  return out;
}

} // namespace

TEST(ActivationCheckpointing, StagesAllAndBlocksGiveThePlainGradients) {
  // BasicBlock (resnet18: every mode) and Bottleneck (resnet50: the mode
  // that calls the blocks one by one; small inputs, it is a big model).
  struct Case {
    const char* name;
    std::int64_t size;
    std::vector<Checkpointing> modes;
  };
  for (const Case& c :
       {Case{
            "resnet18-small",
            16,
            {Checkpointing::Stages, Checkpointing::All, Checkpointing::Blocks}},
        Case{"resnet50-small", 8, {Checkpointing::Blocks}}}) {
    const char* name = c.name;
    torch::manual_seed(0);
    const auto m = make_model(
        ModelOptions().set_name(name).set_in_channels(1).set_num_classes(10));
    const at::Tensor x = at::randn({2, 1, c.size, c.size});
    const at::Tensor y = at::randint(10, {2});
    const auto plain = gradients(*m, Checkpointing::None, x, y);
    for (const Checkpointing mode : c.modes) {
      const auto recomputed = gradients(*m, mode, x, y);
      ASSERT_EQ(recomputed.size(), plain.size());
      for (std::size_t i = 0; i < plain.size(); ++i) {
        // The recompute runs the same kernels on the same inputs (train-mode
        // BatchNorm normalizes with the batch's statistics, which the
        // running statistics do not affect): equal up to float32 summation
        // order.
        EXPECT_TRUE(at::allclose(recomputed[i], plain[i], 1e-5, 1e-7))
            << name << " " << to_string(mode) << " parameter " << i;
      }
    }
  }
}

TEST(ActivationCheckpointing, ModelsWithoutStagesRefuseIt) {
  const auto m = make_model(ModelOptions().set_name("cnn-small"));
  EXPECT_NO_THROW(m->set_checkpointing(Checkpointing::None));
  EXPECT_THROW(m->set_checkpointing(Checkpointing::Stages), UsageError);
  EXPECT_EQ(parse_checkpointing("all"), Checkpointing::All);
  EXPECT_EQ(parse_checkpointing("blocks"), Checkpointing::Blocks);
  EXPECT_THROW(parse_checkpointing("some"), UsageError);
}

} // namespace hotloop::model
