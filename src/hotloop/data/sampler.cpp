#include "hotloop/data/sampler.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "hotloop/data/sources/pack.h"
#include "hotloop/errors.h"

namespace hotloop::data {

Sampler::Sampler(std::size_t dataset_size, SamplerOptions options)
    : n_(dataset_size), options_(options) {
  if (options_.batch_size == 0) {
    throw UsageError("batch size must be at least 1");
  }
  if (options_.world_size < 1 || options_.rank < 0 ||
      options_.rank >= options_.world_size) {
    throw UsageError(fmt::format(
        "rank {} of world size {} is not a valid rank",
        options_.rank,
        options_.world_size));
  }
  set_epoch(0);
}

void Sampler::set_epoch(std::size_t epoch) {
  if (options_.shuffle) {
    // Mix seed and epoch so that consecutive epochs (and seeds) give unrelated
    // orders.
    order_ = shuffled_order(
        n_,
        options_.seed * 0x9E3779B97F4A7C15ULL ^
            (epoch + 1) * 0xD1B54A32D192ED03ULL);
  } else {
    order_.resize(n_);
    std::iota(order_.begin(), order_.end(), 0);
  }
}

std::size_t Sampler::batches_per_epoch() const {
  const std::size_t global =
      options_.batch_size * static_cast<std::size_t>(options_.world_size);
  if (options_.drop_last) {
    return n_ / global;
  }
  // Without dropping, the last global batch is shared out in order; a rank may
  // get a short batch.
  const std::size_t full = n_ / global;
  const std::size_t rest = n_ % global;
  const std::size_t before_me =
      options_.batch_size * static_cast<std::size_t>(options_.rank);
  return full + (rest > before_me ? 1 : 0);
}

std::vector<std::size_t> Sampler::batch(std::size_t b) const {
  const std::size_t global =
      options_.batch_size * static_cast<std::size_t>(options_.world_size);
  const std::size_t begin = std::min(
      n_,
      b * global +
          options_.batch_size * static_cast<std::size_t>(options_.rank));
  const std::size_t end = std::min(n_, begin + options_.batch_size);
  return {
      order_.begin() + static_cast<std::ptrdiff_t>(begin),
      order_.begin() + static_cast<std::ptrdiff_t>(end)};
}

} // namespace hotloop::data
