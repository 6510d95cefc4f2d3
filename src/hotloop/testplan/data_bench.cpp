#include "hotloop/testplan/data_bench.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <torch/cuda.h>

#include "hotloop/core/cpus.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/errors.h"

namespace hotloop::testplan {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

DataBenchResult decode_only(
    const data::Dataset& ds,
    const DataBenchOptions& o,
    unsigned int workers) {
  DataBenchResult r;
  r.mode = "decode-only";
  r.decode = "full";
  r.workers = workers;
  std::atomic<std::size_t> images{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::size_t> bad{0};
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (std::size_t i = w; !stop; i += workers) {
        try {
          const data::Sample s = ds.get(i % ds.size());
          bytes += static_cast<std::uint64_t>(s.image.numel());
          ++images;
        } catch (const DataError&) {
          ++bad;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (auto& t : pool) {
    t.join();
  }
  r.seconds = since(start);
  r.images = images;
  r.bad_samples = bad;
  r.mb_per_s = static_cast<double>(bytes) / 1e6 / r.seconds;
  return r;
}

} // namespace

DataBenchResult bench_data(const DataBenchOptions& o) {
  const auto t_open = Clock::now();
  data::DataSpec spec = data::parse_data_spec(o.spec);
  spec.max_image_pixels = o.loader.max_image_pixels;
  std::shared_ptr<const data::Dataset> ds =
      data::open_dataset(spec, o.split, o.loader.seed);
  const unsigned int workers =
      o.loader.workers > 0 ? o.loader.workers : usable_cpus();
  if (o.decode_only) {
    DataBenchResult r = decode_only(*ds, o, workers);
    r.source = ds->describe();
    r.setup_seconds = since(t_open);
    r.images_per_s = static_cast<double>(r.images) / r.seconds;
    return r;
  }
  data::LoaderOptions lo = o.loader;
  lo.workers = workers;
  data::Loader loader(ds, lo);
  DataBenchResult r;
  r.source = ds->describe();
  r.mode = loader.resident()       ? "resident"
      : o.loader.augment_on_device ? "threaded, augmented on the device"
      : o.loader.decode_on_device  ? "threaded, JPEGs decoded on the device"
                                   : "threaded";
  r.feed = loader.feed_reason();
  r.decode = name_of<data::Decode>(data::kDecodeNames, o.loader.decode);
  r.workers = workers;
  r.setup_seconds = since(t_open);
  std::size_t epoch = 0;
  const auto next = [&] {
    auto b = loader.next();
    if (!b) {
      loader.start_epoch(++epoch);
      b = loader.next();
    }
    return b;
  };
  next(); // warm-up: threads started, first batch built, first GPU copy done
  const double wait_before = loader.stats().wait_seconds;
  std::uint64_t bytes = 0;
  const auto start = Clock::now();
  while (since(start) < o.seconds) {
    const auto b = next();
    if (!b) {
      break; // an empty data set
    }
    r.images += static_cast<std::size_t>(b->images.size(0));
    bytes += static_cast<std::uint64_t>(
        b->images.numel()); // one uint8 byte per value before conversion
  }
  if (lo.device.is_cuda()) {
    torch::cuda::synchronize(); // count only batches that really arrived
  }
  r.seconds = since(start);
  r.images_per_s = static_cast<double>(r.images) / r.seconds;
  r.mb_per_s = static_cast<double>(bytes) / 1e6 / r.seconds;
  r.wait_fraction = (loader.stats().wait_seconds - wait_before) / r.seconds;
  r.bad_samples = loader.stats().bad_samples;
  r.gpu_decoded = loader.stats().gpu_decoded;
  r.gpu_fallbacks = loader.stats().gpu_fallbacks;
  return r;
}

nlohmann::json to_json(const DataBenchResult& r) {
  return {
      {"source", r.source},
      {"mode", r.mode},
      {"decode", r.decode},
      {"workers", r.workers},
      {"images", r.images},
      {"seconds", r.seconds},
      {"images_per_s", r.images_per_s},
      {"mb_per_s", r.mb_per_s},
      {"setup_seconds", r.setup_seconds},
      {"wait_fraction", r.wait_fraction},
      {"bad_samples", r.bad_samples},
      {"feed", r.feed},
      {"gpu_decoded", r.gpu_decoded},
      {"gpu_fallbacks", r.gpu_fallbacks}};
}

} // namespace hotloop::testplan
