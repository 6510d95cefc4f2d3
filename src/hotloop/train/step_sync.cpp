#include "hotloop/train/step_sync.h"

#include "hotloop/parallel/process_group.h"

namespace hotloop::train {

StepSync::StepSync(
    std::shared_ptr<parallel::ProcessGroup> group,
    std::unique_ptr<parallel::GradientSync> reducer)
    : group_(std::move(group)), reducer_(std::move(reducer)) {}

StepSync::Agreement StepSync::agree(
    bool out_of_memory,
    bool stop,
    std::int64_t targets) {
  // Every rank starts every gradient bucket, OOM or not, so the collectives
  // line up; then one all-reduce shares what any rank saw (counts below
  // 2^53: exact in the doubles it sums).
  reducer_->launch_rest(out_of_memory);
  const std::vector<double> sum = group_->allreduce_sum(
      {out_of_memory ? 1.0 : 0.0,
       stop ? 1.0 : 0.0,
       static_cast<double>(targets)},
      "step agreement");
  return {sum[0] > 0, sum[1] > 0, static_cast<std::int64_t>(sum[2])};
}

int StepSync::world_size() const {
  return group_->size();
}

} // namespace hotloop::train
