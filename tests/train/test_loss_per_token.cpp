// The loss per trained token (train/eager_step.cpp): a step's loss is the sum
// of its token losses over every micro-batch and rank, divided by the tokens
// it trains in all of them. So on windows whose answers differ in length,
// accumulating micro-batches, or splitting the batch over ranks, gives the
// loss and the update of the one large batch (transformers #34191's fix).

#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <ATen/ops/allclose.h>
#include <nlohmann/json.hpp>

#include "hotloop/data/tokens/token_data.h"
#include "hotloop/train/trainer.h"
#include "support/free_port.h"
#include "support/loopback_group.h"
#include "support/temp_dir.h"
#include "support/train_fixtures.h"

namespace hotloop::train {
namespace {

constexpr std::int64_t kContext = 16;

// 16 windows of kContext + 1 tokens, one a sequence; window i trains its
// last answer(i) targets (1 to 16 of them), the rest is its prompt. A batch
// of 8 cut into micro-batches of 2 has micro-batches of very different
// trained counts.
std::shared_ptr<const data::Dataset> uneven_answers() {
  std::vector<data::TokenSequence> seqs;
  for (int i = 0; i < 16; ++i) {
    data::TokenSequence s;
    s.name = "example " + std::to_string(i);
    const int answer = 1 + (i * 7) % 16;
    for (int t = 0; t <= kContext; ++t) {
      s.ids.push_back(static_cast<std::uint32_t>((i * 31 + t * 17) % 256));
      s.trained.push_back(t > kContext - answer ? 1 : 0);
    }
    seqs.push_back(std::move(s));
  }
  return data::TokenDataset::from_ids(std::move(seqs), "uneven answers");
}

// A one-layer GPT under plain SGD, no clipping: the update is the gradient
// itself, so a wrong normalization shows in the weights.
TrainerOptions gpt_sgd(const std::string& out) {
  TrainerOptions o = test::small_options(out);
  o.model = model::ModelOptions();
  o.model.name = "gpt-nano";
  o.model.lm.layers = 1;
  o.model.lm.heads = 2;
  o.model.lm.width = 32;
  o.model.lm.context = kContext;
  o.model.lm.vocab = 256;
  o.batch = 8;
  o.steps = 2;
  o.schedule.lr = 0.5;
  return o;
}

std::vector<double> losses(const std::string& run_dir) {
  std::ifstream in(std::filesystem::path(run_dir) / "metrics.jsonl");
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss") && j.contains("step_time_ms")) {
      out.push_back(j["loss"].get<double>());
    }
  }
  return out;
}

void expect_same_weights(const model::Model& a, const model::Model& b) {
  const auto wa = model::state_dict(a);
  const auto wb = model::state_dict(b);
  ASSERT_EQ(wa.size(), wb.size());
  for (std::size_t i = 0; i < wa.size(); ++i) {
    // fp32 sums in another order: ~1e-7 relative.
    EXPECT_TRUE(at::allclose(wa[i].second, wb[i].second, 1e-5, 1e-6))
        << wa[i].first;
  }
}

void expect_same_losses(
    const std::vector<double>& a,
    const std::vector<double>& b) {
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-6 * a[i]) << "step " << i + 1;
  }
}

TEST(LossPerToken, AccumulatingUnevenAnswersGivesTheUpdateOfTheWholeBatch) {
  test::TempDir dir;
  const auto data = uneven_answers();
  TrainerOptions whole = gpt_sgd((dir.path() / "whole").string());
  TrainerOptions accum = whole;
  accum.out_dir = (dir.path() / "accum").string();
  accum.micro_batch = 2; // 4 micro-batches a step
  auto m1 = test::make(whole);
  auto m2 = test::make(accum);
  Trainer(m1, data, nullptr, whole).fit();
  const TrainSummary s = Trainer(m2, data, nullptr, accum).fit();
  ASSERT_EQ(s.accum_steps, 4);
  expect_same_losses(losses(whole.out_dir), losses(accum.out_dir));
  expect_same_weights(*m1, *m2);
}

TEST(LossPerToken, TwoGlooRanksGiveTheUpdateOfOneRankAtTheSameGlobalBatch) {
  test::TempDir dir;
  const auto data = uneven_answers();
  TrainerOptions one = gpt_sgd((dir.path() / "one").string());
  one.micro_batch = 2; // 4 micro-batches on one rank
  auto m1 = test::make(one);
  Trainer(m1, data, nullptr, one).fit();

  // The same global batch of 8 on two ranks (threads of this process, Gloo
  // over loopback), 2 micro-batches of 2 each.
  const int port = test::free_port();
  std::vector<std::shared_ptr<model::Model>> models = {
      test::make(one), test::make(one)};
  auto rank = [&](int r) {
    TrainerOptions o = one;
    o.out_dir = (dir.path() / "two").string();
    TrainerContext context({}, test::loopback_group(r, 2, port), RunRecord{});
    Trainer(models[static_cast<std::size_t>(r)], data, nullptr, o, context)
        .fit();
  };
  auto r0 = std::async(std::launch::async, rank, 0);
  auto r1 = std::async(std::launch::async, rank, 1);
  r0.get();
  r1.get();
  expect_same_weights(*m1, *models[0]);
  expect_same_weights(*m1, *models[1]);
}

} // namespace
} // namespace hotloop::train
