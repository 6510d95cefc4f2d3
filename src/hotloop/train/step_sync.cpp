#include "hotloop/train/step_sync.h"

#include "hotloop/parallel/process_group.h"

namespace hotloop::train {

StepSync::StepSync(
    std::shared_ptr<parallel::ProcessGroup> group,
    const std::vector<at::Tensor>& params,
    const parallel::ReducerOptions& options)
    : group_(group), reducer_(group, params, options) {}

StepSync::Agreement StepSync::agree(bool out_of_memory, bool stop) {
  // Every rank starts every gradient bucket, OOM or not, so the collectives
  // line up; then one all-reduce shares what any rank saw.
  reducer_.launch_rest();
  const std::int64_t agreed = group_->allreduce_max(
      (out_of_memory ? 1 : 0) | (stop ? 2 : 0), "step agreement");
  return {(agreed & 1) != 0, (agreed & 2) != 0};
}

} // namespace hotloop::train
