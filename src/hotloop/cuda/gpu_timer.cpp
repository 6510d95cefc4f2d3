#include "hotloop/cuda/gpu_timer.h"

namespace hotloop::cuda {

GpuTimer::GpuTimer(
    std::unique_ptr<EventApi> events,
    std::size_t labels,
    std::size_t max_in_flight)
    : api_(std::move(events)),
      labels_(labels),
      max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight) {}

GpuTimer::~GpuTimer() {
  auto destroy = [this](const std::unique_ptr<Marks>& m) {
    if (m) {
      for (auto e : m->events) {
        api_->destroy(e);
      }
    }
  };
  destroy(current_);
  for (const auto& m : pending_) {
    destroy(m);
  }
  for (const auto& m : spare_) {
    destroy(m);
  }
}

void GpuTimer::begin() {
  if (!current_) {
    if (spare_.empty()) {
      current_ = std::make_unique<Marks>();
    } else {
      current_ = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  current_->used = 0;
  mark(0);
}

void GpuTimer::mark(std::size_t label) {
  if (!current_) {
    return; // outside begin() .. end()
  }
  Marks& m = *current_;
  if (m.used == m.events.size()) {
    m.events.push_back(api_->create());
    m.labels.push_back(0);
  }
  m.labels[m.used] = label;
  api_->record(m.events[m.used]);
  ++m.used;
}

void GpuTimer::take(Marks& m, std::vector<TimedStep>& out) {
  TimedStep t;
  t.step = m.step;
  t.ms.assign(labels_, 0.0);
  for (std::size_t i = 1; i < m.used; ++i) {
    if (m.labels[i] < labels_) {
      t.ms[m.labels[i]] += api_->elapsed_ms(m.events[i - 1], m.events[i]);
    }
  }
  out.push_back(std::move(t));
}

std::vector<TimedStep> GpuTimer::end(std::int64_t step) {
  if (current_ && current_->used >= 2) {
    current_->step = step;
    pending_.push_back(std::move(current_));
  }
  std::vector<TimedStep> out;
  while (!pending_.empty()) {
    Marks& oldest = *pending_.front();
    const auto last = oldest.events[oldest.used - 1];
    if (pending_.size() > max_in_flight_) {
      api_->wait(last);
    } else if (!api_->done(last)) {
      break; // the stream is still behind it (and so behind the later ones)
    }
    take(oldest, out);
    spare_.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return out;
}

std::vector<TimedStep> GpuTimer::drain() {
  std::vector<TimedStep> out;
  while (!pending_.empty()) {
    Marks& oldest = *pending_.front();
    api_->wait(oldest.events[oldest.used - 1]);
    take(oldest, out);
    spare_.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return out;
}

} // namespace hotloop::cuda
