#pragma once
// Which samples go in which batch: the epoch's order is a function of (seed,
// epoch), and with several ranks each global batch of batch_size x world_size
// consecutive positions is cut into one equal part per rank. So N ranks
// together see exactly the samples one rank would, each once per epoch.

#include <cstdint>
#include <vector>

namespace hotloop::data {

struct SamplerOptions {
  std::size_t batch_size = 64; // per rank
  int world_size = 1;
  int rank = 0;
  bool shuffle = true;
  bool drop_last = true; // drop the last partial global batch (training); false
                         // covers every sample (eval)
  std::uint64_t seed = 0;
};

class Sampler {
 public:
  Sampler(
      std::size_t dataset_size,
      SamplerOptions options); // throws UsageError for a bad rank or batch
  void set_epoch(std::size_t epoch); // recomputes the order
  std::size_t batches_per_epoch() const; // for this rank
  std::vector<std::size_t> batch(
      std::size_t b) const; // dataset indices of this rank's batch b
  const SamplerOptions& options() const {
    return options_;
  }

 private:
  std::size_t n_;
  SamplerOptions options_;
  std::vector<std::size_t> order_;
};

} // namespace hotloop::data
