#pragma once
// SIGINT/SIGTERM as a request to stop cleanly: while a StopSignal lives, the
// first signal sets a flag the trainer polls between steps (finish the step,
// checkpoint, exit 0); a second one kills the process as usual. The flag is
// process-wide because signal handlers are.

#include <atomic>

namespace hotloop {

class StopSignal {
 public:
  StopSignal(); // installs the handlers
  ~StopSignal(); // restores the previous ones
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  const std::atomic<bool>* flag() const;
  // The signal received (SIGINT, SIGTERM) or 0.
  int signal() const;
};

} // namespace hotloop
