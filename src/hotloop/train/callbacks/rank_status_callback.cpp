#include "hotloop/train/callbacks/rank_status_callback.h"

#include "hotloop/parallel/process_group.h"

namespace hotloop::train {

void RankStatusCallback::on_phase(const RunState& s, Phase p) {
  if (s.group != nullptr) {
    s.group->set_status(s.step, p);
  }
}

nlohmann::json RankStatusCallback::on_fit_end(
    const RunState& s,
    const TrainSummary&) {
  if (s.group != nullptr) {
    s.group->set_status(s.step, Phase::Finished);
  }
  return nullptr;
}

} // namespace hotloop::train
