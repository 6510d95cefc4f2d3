#pragma once
// A loader driven by passes, as a Python `for batch in loader` loop drives
// it: each pass reads an epoch, a pass left early (a break) counts as its
// epoch done, and the position can be saved between any two batches and
// loaded into a new loader to go on with the same batches (the resumable
// position every front end shares; hotloop.Loader is a thin binding over it).
//
//   set_epoch(e)  the epoch the next pass reads (a loaded position for this
//                 very epoch keeps its batch)
//   start()       begins a pass: at a loaded position, else at the epoch's
//                 start; after a pass left early, the next epoch
//   next()        the pass's next batch, or nullopt at its end (the next
//                 start() is the next epoch's)
//   position()    where the next batch would come from; load() takes it back

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "hotloop/data/loader.h"

namespace hotloop::data {

// A saved position and the options the sample order depends on.
struct PassPosition {
  std::size_t epoch = 0;
  std::size_t next_batch = 0;
  std::uint64_t seed = 0;
  std::size_t batch_size = 0;
  int world_size = 1;
  int rank = 0;
};

class ResumablePasses {
 public:
  // `options` are those `loader` was made with (seed, batch, ranks).
  ResumablePasses(
      std::unique_ptr<EpochLoader> loader,
      const LoaderOptions& options);

  void set_epoch(std::size_t epoch);
  void start();
  // Waits for the batch holding the position's lock, so that a position()
  // from another thread sees a batch's boundary.
  std::optional<Batch> next();
  // Inside an epoch: its next batch; between epochs, or after an epoch's
  // last batch: the next epoch's start.
  PassPosition position() const;
  // UsageError when `p` is of a loader with another seed, batch or world
  // size (the order would differ), or past the epoch's batches.
  void load(const PassPosition& p);

  std::size_t batches_per_epoch() const {
    return loader_->batches_per_epoch();
  }
  const EpochLoader& loader() const {
    return *loader_;
  }

 private:
  void begin_pass(); // under mu_

  std::unique_ptr<EpochLoader> loader_;
  PassPosition options_; // seed, batch, ranks
  mutable std::mutex mu_;
  std::size_t epoch_ = 0;
  std::size_t start_batch_ = 0;
  bool loaded_ = false; // start_batch_ is a loaded position's
  bool in_epoch_ = false;
};

} // namespace hotloop::data
