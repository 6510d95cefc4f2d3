#pragma once
// A data-parallel rank's status: each phase it enters, with its step, goes to
// the process group's status publisher (parallel/rank_status.h: two relaxed
// stores here, published twice a second by a thread), so that when a rank
// dies the others and the launcher name it with its last step and phase. The
// Trainer adds it to every run with a process group.

#include "hotloop/train/callback.h"

namespace hotloop::train {

class RankStatusCallback final : public Callback {
 public:
  std::string name() const override {
    return "rank-status";
  }
  void on_phase(const RunState& s, Phase p) override;
  nlohmann::json on_fit_end(const RunState& s, const TrainSummary& summary)
      override;
};

} // namespace hotloop::train
