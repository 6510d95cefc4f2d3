// GpuTimer's ring of steps against fake events whose completion the test
// decides: on a GPU the host queues many steps ahead of the device, and the
// timer used to read only the previous step's events, dropping them when
// they had not completed, so that most steps' phases vanished exactly when
// the GPU was the bottleneck. Now every step is read once, in order, when
// its events complete; and StepTimes takes a run's speed from such a clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "hotloop/cuda/gpu_timer.h"
#include "hotloop/train/step_times.h"

namespace hotloop::cuda {
namespace {

// A device that runs what was recorded in order: the i-th record() happens
// at i * ms_per_record milliseconds, and the device has passed the first
// `passed` records.
struct FakeDevice {
  std::uint64_t recorded = 0;
  std::uint64_t passed = 0;
  double ms_per_record = 1.0;
  int created = 0, destroyed = 0, waits = 0;
};

class FakeEvents final : public EventApi {
 public:
  explicit FakeEvents(FakeDevice& d) : d_(d) {}
  Event create() override {
    ++d_.created;
    return new std::uint64_t(0);
  }
  void record(Event e) override {
    *seq(e) = d_.recorded++;
  }
  bool done(Event e) override {
    return *seq(e) < d_.passed;
  }
  void wait(Event e) override {
    ++d_.waits;
    d_.passed = std::max(d_.passed, *seq(e) + 1);
  }
  double elapsed_ms(Event from, Event to) override {
    return static_cast<double>(*seq(to) - *seq(from)) * d_.ms_per_record;
  }
  void destroy(Event e) noexcept override {
    ++d_.destroyed;
    delete seq(e);
  }

 private:
  static std::uint64_t* seq(Event e) {
    return static_cast<std::uint64_t*>(e);
  }
  FakeDevice& d_;
};

// One step: begin, then phases 1 and 2 (three records).
void step(GpuTimer& t) {
  t.begin();
  t.mark(1);
  t.mark(2);
}

TEST(GpuTimer, EveryStepIsReadOnceInOrderWhenTheGpuIsBehindTheHost) {
  FakeDevice d;
  std::vector<TimedStep> got;
  {
    GpuTimer t(std::make_unique<FakeEvents>(d), 3, /*max_in_flight=*/64);
    std::int64_t n = 0;
    for (int i = 0; i < 10; ++i) {
      step(t);
      const auto done = t.end(n++); // the device has run nothing yet
      EXPECT_TRUE(done.empty()) << "step " << i;
    }
    EXPECT_EQ(t.in_flight(), 10u);
    d.passed = 3 * 6; // the device has finished the first 6 steps
    step(t);
    got = t.end(n++);
    ASSERT_EQ(got.size(), 6u);
    step(t);
    d.passed = d.recorded; // and now everything
    for (auto& s : t.end(n++)) {
      got.push_back(std::move(s));
    }
    EXPECT_EQ(d.waits, 0); // never waited
  }
  ASSERT_EQ(got.size(), 12u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].step, static_cast<std::int64_t>(i));
    ASSERT_EQ(got[i].ms.size(), 3u);
    EXPECT_EQ(got[i].ms[0], 0.0);
    EXPECT_EQ(got[i].ms[1], 1.0); // begin -> mark(1): one record later
    EXPECT_EQ(got[i].ms[2], 1.0);
  }
  EXPECT_EQ(d.created, d.destroyed);
}

TEST(GpuTimer, TooManyStepsInFlightWaitForTheOldestOnly) {
  FakeDevice d;
  GpuTimer t(std::make_unique<FakeEvents>(d), 3, /*max_in_flight=*/4);
  std::size_t read = 0;
  for (int i = 0; i < 10; ++i) {
    step(t);
    read += t.end(i).size();
    EXPECT_LE(t.in_flight(), 4u);
  }
  EXPECT_EQ(d.waits, 6); // steps 0..5, each when it was the 5th in flight
  EXPECT_EQ(read, 6u);
  const auto rest = t.drain();
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(rest.front().step, 6);
  EXPECT_EQ(rest.back().step, 9);
  EXPECT_EQ(t.in_flight(), 0u);
  // The events of finished steps are reused, not made anew each step.
  EXPECT_LE(d.created, 3 * 6);
}

TEST(GpuTimer, AStepBegunAgainReplacesItsMarks) {
  // OOM recovery redoes a step: its first begin() is not a step of its own.
  FakeDevice d;
  GpuTimer t(std::make_unique<FakeEvents>(d), 3);
  t.begin();
  t.mark(1);
  step(t);
  d.passed = d.recorded;
  const auto done = t.end(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].ms[1], 1.0);
  EXPECT_EQ(done[0].ms[2], 1.0);
}

} // namespace
} // namespace hotloop::cuda

namespace hotloop::train {
namespace {

TEST(StepTimes, OnTheDeviceClockImagesPerSecondAreSamplesOverGpuTime) {
  cuda::FakeDevice d;
  d.ms_per_record = 10.0; // each step: 10 ms on the device
  StepTimes times;
  times.use_device_clock(std::make_unique<cuda::GpuTimer>(
      std::make_unique<cuda::FakeEvents>(d), 1));
  for (int i = 0; i < 20; ++i) {
    times.begin_step();
    // The host queued the step in 0.1 ms: its clock would say 10x faster.
    times.add(1e-4, 0);
    d.passed = d.recorded - 1; // the device lags a record behind
  }
  TrainSummary s;
  times.fill(s, 64, nlohmann::json::object());
  EXPECT_EQ(s.step_clock, "cuda-events");
  // Begin and end of a step are consecutive records: 10 ms per step.
  EXPECT_NEAR(s.images_per_s, 64 / 0.010, 1e-6);
  EXPECT_NEAR(s.step_time_ms_median, 10.0, 1e-9);

  StepTimes host;
  for (int i = 0; i < 20; ++i) {
    host.begin_step();
    host.add(0.010, 0);
  }
  TrainSummary h;
  host.fill(h, 64, nlohmann::json::object());
  EXPECT_EQ(h.step_clock, "host");
  EXPECT_NEAR(h.images_per_s, 6400, 1e-6);
}

} // namespace
} // namespace hotloop::train
