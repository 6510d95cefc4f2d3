#include "hotloop/testplan/one_batch_steps.h"

namespace hotloop::testplan {

train::StepResult OneBatchSteps::run(double lr) {
  state_.model->train();
  train::StepResult r = step_->run(state_, lr);
  ++state_.step;
  return r;
}

} // namespace hotloop::testplan
