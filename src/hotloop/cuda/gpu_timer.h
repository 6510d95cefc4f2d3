#pragma once
// Step phases timed on the GPU without adding a synchronization: CUDA events
// recorded on the current stream at each phase boundary, read one step later
// (by then they have usually completed; when not, that step's GPU times are
// skipped, never waited for). Without CUDA, every read is empty.

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

namespace hotloop::cuda {

class GpuTimer {
 public:
  // `labels`: how many phase kinds the intervals are summed into.
  GpuTimer(int device, std::size_t labels);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  // Starts a step's marks (records the first event).
  void begin();
  // Records an event; the interval since the previous one counts as `label`.
  void mark(std::size_t label);
  // Ends the step. Returns the previous step's milliseconds per label when
  // all its events have completed, nullopt otherwise.
  std::optional<std::vector<double>> end();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace hotloop::cuda
