#pragma once
// Steps reported by the job: watch makes a FIFO and passes its path in
// $HOTLOOP_WATCH_STEPS; a job writes one line per step, `step=12 loss=0.53`
// or `{"step": 12, "loss": 0.53}` (python/hotloop_watch.py does it in a few
// lines). Lines of up to 4 KiB are written atomically, so several ranks can
// share the FIFO. Watch holds a writer end itself, so the FIFO never reports
// end-of-file between the job's writers.
// A job watch did not start (--pid) has no such variable: watch links the FIFO
// at rendezvous_path(pid), and the helper looks there for its own pid and its
// ancestors' (torchrun's ranks under a watched torchrun).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hotloop::watch {

constexpr const char* kStepsEnv = "HOTLOOP_WATCH_STEPS";

struct StepEvent {
  double unix_time = 0; // the line's "time", else when watch read it
  std::int64_t step = 0;
  int rank = 0; // "rank", else 0
  std::map<std::string, double> values; // loss, lr, samples, ...
};

// One line; nullopt when it is not a step (no integer "step", or not
// key=value pairs / a JSON object). `received` stands in for a missing time.
std::optional<StepEvent> parse_step_line(
    const std::string& line,
    double received);

class StepChannel {
 public:
  // Creates the FIFO at `path` (replacing a stale one). Throws DataError
  // when it cannot be made.
  explicit StepChannel(std::string path);
  ~StepChannel(); // closes and removes the FIFO
  StepChannel(const StepChannel&) = delete;
  StepChannel& operator=(const StepChannel&) = delete;

  const std::string& path() const {
    return path_;
  }
  int fd() const {
    return read_fd_;
  }
  // Reads what is there without blocking; complete lines become events.
  std::vector<StepEvent> drain(double now);
  std::size_t bad_lines() const {
    return bad_lines_;
  }
  const std::string& first_bad_line() const {
    return first_bad_;
  }

 private:
  std::string path_;
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::string partial_;
  std::size_t bad_lines_ = 0;
  std::string first_bad_;
};

// /tmp/hotloop-watch-UID/PID: where a running job finds the FIFO of the watch
// following it (UID: the effective user, whose folder only it can enter).
std::string rendezvous_path(int pid);
// /tmp/hotloop-watch-UID, rendezvous_path's folder.
std::string rendezvous_dir();

// The link rendezvous_path(pid) -> `fifo` while it lives.
class StepRendezvous {
 public:
  // Throws DataError with the reason when the folder is not a private folder
  // of this user's, or another watch of this pid holds the link already.
  // `dir`: the folder the link goes in (another one only in tests).
  StepRendezvous(
      int pid,
      const std::string& fifo,
      const std::string& dir = rendezvous_dir());
  ~StepRendezvous(); // removes the link, if it still points to `fifo`
  StepRendezvous(const StepRendezvous&) = delete;
  StepRendezvous& operator=(const StepRendezvous&) = delete;

  const std::string& path() const {
    return path_;
  }

 private:
  std::string path_;
  std::string fifo_;
};

} // namespace hotloop::watch
