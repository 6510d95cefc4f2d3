#pragma once
// Intervals timed on the GPU without adding a synchronization: events
// recorded on the current stream at each mark, kept in a ring of steps, and
// each step read once all its events have completed: never dropped because
// the GPU is behind the host (a graph replay is queued in microseconds; the
// host may run many steps ahead). The trainer times whole steps with one
// (its images/s on a GPU), the run's telemetry the phases of each step.
// The events come through EventApi: CUDA's on a GPU, a fake in the tests.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace hotloop::cuda {

// The few event calls the timer makes (cudaEvent_t on a GPU).
class EventApi {
 public:
  using Event = void*;
  virtual ~EventApi() = default;
  // A new event; throws when the driver cannot make one.
  virtual Event create() = 0;
  // On the device's current stream; throws on a CUDA error.
  virtual void record(Event e) = 0;
  // Whether the stream has passed `e` (never waits); throws on a CUDA error.
  virtual bool done(Event e) = 0;
  // Blocks until the stream has passed `e`.
  virtual void wait(Event e) = 0;
  virtual double elapsed_ms(Event from, Event to) = 0;
  virtual void destroy(Event e) noexcept = 0;
};

// CUDA events on `device`, with a device guard and checked returns. Throws
// EnvError without a CUDA LibTorch.
std::unique_ptr<EventApi> cuda_events(int device);

// One step's intervals: milliseconds per label, and the step end() named.
struct TimedStep {
  std::int64_t step = 0;
  std::vector<double> ms;
};

class GpuTimer {
 public:
  // `labels`: how many kinds the intervals are summed into. Up to
  // `max_in_flight` steps wait to complete; a step beyond that waits for the
  // oldest (by then the GPU is that far behind: the wait costs it nothing).
  GpuTimer(
      std::unique_ptr<EventApi> events,
      std::size_t labels,
      std::size_t max_in_flight = 64);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  // Starts a step's marks (records its first event).
  void begin();
  // Records an event; the interval since the previous one counts as `label`.
  void mark(std::size_t label);
  // Ends the step, as step number `step`. Returns every earlier or this step
  // whose events have all completed by now and were not returned yet, oldest
  // first.
  std::vector<TimedStep> end(std::int64_t step);
  // Waits for every step not returned yet and returns them, oldest first
  // (the run's end: the last steps' times).
  std::vector<TimedStep> drain();
  std::size_t in_flight() const {
    return pending_.size();
  }

 private:
  struct Marks {
    std::vector<EventApi::Event> events; // grows, reused across steps
    std::vector<std::size_t> labels; // labels[i]: interval (i-1, i)
    std::size_t used = 0;
    std::int64_t step = 0;
  };
  void take(Marks& m, std::vector<TimedStep>& out);

  std::unique_ptr<EventApi> api_;
  std::size_t labels_;
  std::size_t max_in_flight_;
  std::unique_ptr<Marks> current_;
  std::deque<std::unique_ptr<Marks>> pending_;
  std::vector<std::unique_ptr<Marks>> spare_;
};

} // namespace hotloop::cuda
