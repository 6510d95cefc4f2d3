#include "hotloop/data/resumable_passes.h"

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::data {

ResumablePasses::ResumablePasses(
    std::unique_ptr<EpochLoader> loader,
    const LoaderOptions& options)
    : loader_(std::move(loader)) {
  options_.seed = options.seed;
  options_.batch_size = options.batch_size;
  options_.world_size = options.world_size;
  options_.rank = options.rank;
}

void ResumablePasses::set_epoch(std::size_t epoch) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (!(loaded_ && epoch == epoch_)) {
    start_batch_ = 0;
    loaded_ = false;
  }
  epoch_ = epoch;
  in_epoch_ = false;
}

void ResumablePasses::start() {
  const std::lock_guard<std::mutex> lock(mu_);
  if (in_epoch_) {
    ++epoch_;
    start_batch_ = 0;
  }
  begin_pass();
}

std::optional<Batch> ResumablePasses::next() {
  const std::lock_guard<std::mutex> lock(mu_);
  if (!in_epoch_) {
    begin_pass();
  }
  std::optional<Batch> b = loader_->next();
  if (!b) {
    in_epoch_ = false;
    ++epoch_;
  }
  return b;
}

PassPosition ResumablePasses::position() const {
  PassPosition p = options_;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    p.epoch = epoch_;
    p.next_batch = start_batch_;
    if (in_epoch_) {
      std::tie(p.epoch, p.next_batch) = loader_->position();
    }
  }
  if (p.next_batch >= batches_per_epoch()) {
    ++p.epoch;
    p.next_batch = 0;
  }
  return p;
}

void ResumablePasses::load(const PassPosition& p) {
  if (p.seed != options_.seed || p.batch_size != options_.batch_size ||
      p.world_size != options_.world_size) {
    throw UsageError(
        fmt::format(
            "hotloop.Loader.load_state_dict: the state is of a loader with seed {}, batch_size {}, world_size {}; this one has {}, {}, {}",
            p.seed,
            p.batch_size,
            p.world_size,
            options_.seed,
            options_.batch_size,
            options_.world_size),
        "resume with the loader options the state was saved with (the order of the samples depends on them)");
  }
  if (p.next_batch > batches_per_epoch()) {
    throw UsageError(fmt::format(
        "hotloop.Loader.load_state_dict: next_batch {} is past the epoch's {} batches",
        p.next_batch,
        batches_per_epoch()));
  }
  const std::lock_guard<std::mutex> lock(mu_);
  epoch_ = p.epoch;
  start_batch_ = p.next_batch;
  loaded_ = true;
  in_epoch_ = false;
}

void ResumablePasses::begin_pass() {
  loader_->start_epoch(epoch_, start_batch_);
  start_batch_ = 0;
  loaded_ = false;
  in_epoch_ = true;
}

} // namespace hotloop::data
