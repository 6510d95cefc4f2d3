#include "hotloop/train/events.h"

namespace hotloop::train {

void Events::fit_start(const RunState& s) {
  for (const auto& c : callbacks_) {
    c->on_fit_start(s);
  }
}

void Events::step_begin(const RunState& s) {
  for (const auto& c : callbacks_) {
    c->on_step_begin(s);
  }
}

void Events::phase(const RunState& s, Phase p) {
  for (const auto& c : callbacks_) {
    c->on_phase(s, p);
  }
}

void Events::gradients(const RunState& s) {
  for (const auto& c : callbacks_) {
    c->on_gradients(s);
  }
}

void Events::step_end(const RunState& s, const StepEnd& e) {
  for (const auto& c : callbacks_) {
    c->on_step_end(s, e);
  }
}

void Events::loss(const RunState& s, const StepLoss& l) {
  for (const auto& c : callbacks_) {
    c->on_loss(s, l);
  }
}

void Events::evaluation(const RunState& s, const EvalResult& r) {
  for (const auto& c : callbacks_) {
    c->on_evaluation(s, r);
  }
}

void Events::checkpoint(const RunState& s, const std::string& path) {
  for (const auto& c : callbacks_) {
    c->on_checkpoint(s, path);
  }
}

void Events::oom_recovery(const RunState& s, const OomRecoveryEvent& e) {
  for (const auto& c : callbacks_) {
    c->on_oom_recovery(s, e);
  }
}

void Events::message(const RunState& s, const std::string& line) {
  for (const auto& c : callbacks_) {
    c->on_message(s, line);
  }
}

nlohmann::json Events::fit_end(const RunState& s, const TrainSummary& summary) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& c : callbacks_) {
    nlohmann::json j = c->on_fit_end(s, summary);
    if (!j.is_null()) {
      out[c->name()] = std::move(j);
    }
  }
  return out;
}

} // namespace hotloop::train
