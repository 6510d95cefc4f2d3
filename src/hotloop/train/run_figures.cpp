#include "hotloop/train/run_figures.h"

#include <sys/resource.h>

namespace hotloop::train {

std::uint64_t peak_rss_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<std::uint64_t>(u.ru_maxrss) * 1024; // Linux: KiB
}

void fill_model_flops(TrainSummary& sum, const RunState& s) {
  sum.tokens_per_s =
      sum.images_per_s * static_cast<double>(s.model->tokens_per_sample());
  sum.model_flops_per_s = sum.images_per_s * s.flops_per_sample;
  if (s.peak_flops_per_s > 0 && sum.model_flops_per_s > 0) {
    sum.mfu = sum.model_flops_per_s / s.peak_flops_per_s;
    sum.mfu_peak_source = s.peak_source;
  }
}

} // namespace hotloop::train
