#pragma once
// The console (rank 0): the trainer's log lines, the progress bar on a
// terminal (cleared before each line and redrawn below it), or off a
// terminal a plain line every log_every_s seconds, printed once that step's
// loss has been read back so that the line shows its own loss; and each
// evaluation's result.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "hotloop/core/progress.h"
#include "hotloop/train/callback.h"
#include "hotloop/train/callbacks/standard_callbacks.h"

namespace hotloop::train {

class ConsoleLog final : public Callback {
 public:
  explicit ConsoleLog(ConsoleOptions options);

  std::string name() const override {
    return "console";
  }
  void on_fit_start(const RunState& s) override;
  void on_step_end(const RunState& s, const StepEnd& e) override;
  void on_loss(const RunState& s, const StepLoss& l) override;
  void on_evaluation(const RunState& s, const EvalResult& r) override;
  void on_message(const RunState& s, const std::string& line) override;
  nlohmann::json on_fit_end(const RunState& s, const TrainSummary& summary)
      override;

 private:
  void print(const std::string& line) const;
  std::string loss_text() const;
  static std::string flops_text(const RunState& s, const StepEnd& e);

  ConsoleOptions options_;
  bool talk_ = true; // rank 0
  std::unique_ptr<Progress> progress_;
  std::chrono::steady_clock::time_point last_line_;
  double last_loss_ = std::nan("");
  const char* unit_ = "img/s"; // tok/s for language models
  // Progress lines due (every options_.log_every_s), waiting for their step's
  // loss.
  struct Due {
    std::int64_t step = 0;
    std::size_t epoch = 0;
    double lr = 0;
    double rate = 0;
    std::string flops; // "MFU 41.2%" or "52.1 GFLOP/s"; "" when unknown
  };
  std::deque<Due> due_;
  std::int64_t total_steps_ = 0;
};

} // namespace hotloop::train
