// When the training step is captured as a CUDA graph, and the runtime
// fallback to eager (with a fake backend in place of a GPU): warm-up, one
// capture, replays; a failed capture runs the step eagerly and every later
// one, with the reason logged, or is an error under --cuda-graphs on.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/Exception.h>

#include "hotloop/errors.h"
#include "hotloop/train/graph_capture.h"
#include "hotloop/train/graph_policy.h"

namespace hotloop::train {
namespace {

GraphConditions capturable() {
  GraphConditions c;
  c.cuda_device = true;
  c.accum_steps = 1;
  c.world_size = 1;
  c.steps_to_run = 100;
  return c;
}

struct FakeBackend final : GraphBackend {
  bool fail = false;
  bool out_of_memory = false;
  int* captures = nullptr;
  int* replays = nullptr;
  std::vector<std::string>* events = nullptr;
  ~FakeBackend() override {
    events->emplace_back("backend destroyed");
  }
  void capture(const std::function<void()>& /*body*/) override {
    ++*captures;
    events->emplace_back("capture");
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        !out_of_memory,
        "CUDA out of memory. Tried to allocate 2.00 GiB");
    if (fail) {
      throw std::runtime_error(
          "CUDA error: operation not permitted when stream is capturing\nbacktrace...");
    }
  }
  void replay() override {
    ++*replays;
  }
};

struct Harness {
  int body_runs = 0, captures = 0, replays = 0;
  std::vector<std::string> log;
  std::vector<std::string> events; // in order
  std::function<void()> before_capture() {
    return [this] { events.emplace_back("gradients dropped"); };
  }
  bool out_of_memory = false;
  GraphedStep make(bool fail, bool required) {
    GraphStepOptions o;
    o.warmup_steps = 3;
    o.required = required;
    return GraphedStep(
        o,
        [this, fail] {
          auto b = std::make_unique<FakeBackend>();
          b->fail = fail;
          b->out_of_memory = out_of_memory;
          b->captures = &captures;
          b->replays = &replays;
          b->events = &events;
          return b;
        },
        [this](const std::string& line) { log.push_back(line); });
  }
  std::function<void()> body() {
    return [this] {
      ++body_runs;
      events.emplace_back("body");
    };
  }
};

} // namespace

TEST(GraphPolicy, ABf16SingleGpuRunWithoutAccumulationIsCaptured) {
  const GraphDecision d = decide_graph_capture(CudaGraphs::Auto, capturable());
  EXPECT_TRUE(d.capture);
  EXPECT_TRUE(d.reason.empty());
  EXPECT_TRUE(decide_graph_capture(CudaGraphs::On, capturable()).capture);
}

TEST(GraphPolicy, EachObstacleGivesItsReason) {
  struct Case {
    const char* name;
    GraphConditions c;
    const char* reason;
  };
  std::vector<Case> cases;
  GraphConditions c = capturable();
  c.cuda_device = false;
  cases.push_back({"cpu", c, "the device is the CPU"});
  c = capturable();
  c.precision = "fp16 loss scaling decides on the host";
  cases.push_back({"fp16", c, "fp16 loss scaling"});
  c = capturable();
  c.accum_steps = 4;
  cases.push_back(
      {"accumulation", c, "gradient accumulation (4 micro-batches"});
  c = capturable();
  c.world_size = 2;
  cases.push_back({"data parallel", c, "data parallel"});
  c.shard = 2;
  cases.push_back({"stage 2", c, "--shard 2: gradients are reduced"});
  c.shard = 3;
  cases.push_back({"stage 3", c, "--shard 3: each block's parameters"});
  c = capturable();
  c.steps_to_run = kGraphWarmupSteps;
  cases.push_back({"short", c, "3 step(s) to run"});
  c = capturable();
  c.packed_rows = true;
  cases.push_back({"packed rows", c, "rows packed with several examples"});
  for (const auto& k : cases) {
    const GraphDecision d = decide_graph_capture(CudaGraphs::Auto, k.c);
    EXPECT_FALSE(d.capture) << k.name;
    EXPECT_NE(d.reason.find(k.reason), std::string::npos)
        << k.name << ": " << d.reason;
  }
  const GraphDecision off = decide_graph_capture(CudaGraphs::Off, capturable());
  EXPECT_FALSE(off.capture);
  EXPECT_EQ(off.reason, "--cuda-graphs off");
}

TEST(GraphPolicy, TheModeParsesAndPrintsAndRejectsOtherWords) {
  for (const char* m : {"auto", "on", "off"}) {
    EXPECT_STREQ(to_string(parse_cuda_graphs(m)), m);
  }
  EXPECT_THROW(parse_cuda_graphs("yes"), UsageError);
}

TEST(GraphedStep, WarmsUpEagerlyThenCapturesOnceAndReplaysEveryStep) {
  Harness h;
  GraphedStep step = h.make(/*fail=*/false, /*required=*/false);
  for (int i = 0; i < 10; ++i) {
    step.run(h.body());
  }
  EXPECT_EQ(h.body_runs, 3); // the warm-up; the capture records, runs nothing
  EXPECT_EQ(h.captures, 1);
  EXPECT_EQ(h.replays, 7); // the capturing step and the 6 after it
  EXPECT_EQ(step.replays(), 7);
  EXPECT_EQ(step.state(), GraphedStep::State::Replaying);
  ASSERT_EQ(h.log.size(), 1u);
  EXPECT_NE(
      h.log[0].find("captured after 3 eager warm-up step(s)"),
      std::string::npos);
}

TEST(GraphedStep, AFailedCaptureRunsThatStepAndTheRestEagerlyAndSaysWhy) {
  Harness h;
  GraphedStep step = h.make(/*fail=*/true, /*required=*/false);
  for (int i = 0; i < 10; ++i) {
    step.run(h.body());
  }
  EXPECT_EQ(h.captures, 1); // never tried again
  EXPECT_EQ(h.replays, 0);
  EXPECT_EQ(h.body_runs, 10); // every step ran, none twice, none skipped
  EXPECT_EQ(step.state(), GraphedStep::State::Eager);
  EXPECT_NE(
      step.fallback_reason().find(
          "operation not permitted when stream is capturing"),
      std::string::npos);
  EXPECT_EQ(step.fallback_reason().find("backtrace"), std::string::npos);
  ASSERT_EQ(h.log.size(), 1u);
  EXPECT_NE(h.log[0].find("running eagerly"), std::string::npos) << h.log[0];
}

TEST(GraphedStep, UnderCudaGraphsOnAFailedCaptureIsAnError) {
  Harness h;
  GraphedStep step = h.make(/*fail=*/true, /*required=*/true);
  for (int i = 0; i < 3; ++i) {
    step.run(h.body());
  }
  try {
    step.run(h.body());
    FAIL() << "a failed capture under --cuda-graphs on went on";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("--cuda-graphs on"), std::string::npos);
    EXPECT_NE(e.hint().find("--cuda-graphs auto"), std::string::npos);
  }
}

TEST(GraphedStep, AShapeChangeAfterCaptureEndsTheReplays) {
  Harness h;
  GraphedStep step = h.make(/*fail=*/false, /*required=*/false);
  for (int i = 0; i < 5; ++i) {
    step.run(h.body());
  }
  step.fall_back(
      "the batch changed shape from 8x1x8x8 to 4x1x8x8 (dynamic shapes)");
  step.run(h.body());
  step.run(h.body());
  EXPECT_EQ(h.replays, 2);
  EXPECT_EQ(h.body_runs, 5); // 3 warm-up + the 2 after the fallback
  EXPECT_EQ(step.state(), GraphedStep::State::Eager);
  EXPECT_NE(h.log.back().find("dynamic shapes"), std::string::npos);
}

// The capture starts without the warm-up's gradients (the step drops them in
// `before_capture`, once, right before it), and a failed capture's backend
// is destroyed (on a GPU: the capture ended, the allocator out of capture
// mode, the pool released) before the step runs eagerly.
TEST(
    GraphedStep,
    GradientsGoBeforeTheCaptureAndAFailedBackendBeforeTheEagerStep) {
  for (const bool fail : {false, true}) {
    Harness h;
    GraphedStep step = h.make(fail, /*required=*/false);
    for (int i = 0; i < 5; ++i) {
      step.run(h.body(), h.before_capture());
    }
    const std::vector<std::string> warm_up(3, "body");
    std::vector<std::string> expected = warm_up;
    if (fail) {
      for (const char* e :
           {"gradients dropped",
            "capture",
            "backend destroyed",
            "body",
            "body"}) {
        expected.emplace_back(e);
      }
    } else {
      expected.emplace_back("gradients dropped");
      expected.emplace_back("capture");
    }
    EXPECT_EQ(h.events, expected) << (fail ? "failed capture" : "capture");
  }
}

// A capture that runs out of memory is told apart (the batch finder counts
// that size as not fitting): under auto the step goes on eagerly saying so;
// under --cuda-graphs on the out-of-memory error itself goes on, so that
// OOM recovery or the memory report handles it like any other.
TEST(GraphedStep, ACaptureOutOfMemoryIsToldApart) {
  for (const bool required : {false, true}) {
    Harness h;
    h.out_of_memory = true;
    GraphedStep step = h.make(/*fail=*/false, required);
    for (int i = 0; i < 3; ++i) {
      step.run(h.body());
    }
    if (required) {
      EXPECT_THROW(step.run(h.body()), c10::OutOfMemoryError);
    } else {
      step.run(h.body());
      EXPECT_EQ(step.state(), GraphedStep::State::Eager);
      EXPECT_NE(
          step.fallback_reason().find("ran out of memory"), std::string::npos)
          << step.fallback_reason();
      EXPECT_EQ(h.body_runs, 4); // the step itself ran eagerly
    }
    EXPECT_TRUE(step.capture_out_of_memory());
  }
}

} // namespace hotloop::train
