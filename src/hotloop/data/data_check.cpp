#include "hotloop/data/data_check.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

#include "hotloop/core/cpus.h"
#include "hotloop/core/progress.h"
#include "hotloop/data/augment.h"
#include "hotloop/data/decode/crop_decode.h"
#include "hotloop/data/decode/image_decode.h"
#include "hotloop/data/sources/encoded_images.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

// The PSNR in dB of the loader's crop decode of `e` against a full decode
// with the same crop and resize; 100 for identical. Sets `how`.
double crop_decode_psnr(
    const EncodedSample& e,
    const SampleTransform& t,
    std::uint64_t seed,
    CropDecoded& how) {
  const std::size_t n =
      static_cast<std::size_t>(t.decode.channels * t.spec.out_h * t.spec.out_w);
  std::vector<std::uint8_t> fast(n), full(n);
  how = decode_augment_into(e.bytes, e.name, t, seed, fast.data());
  SampleTransform in_full = t;
  in_full.mode = Decode::Full;
  decode_augment_into(e.bytes, e.name, in_full, seed, full.data());
  double se = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(fast[i]) - full[i];
    se += d * d;
  }
  if (se == 0) {
    return 100.0;
  }
  return std::min(
      100.0, 10 * std::log10(255.0 * 255.0 * static_cast<double>(n) / se));
}

} // namespace

DataCheckReport check_dataset(
    const Dataset& dataset,
    const DataCheckOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  DataCheckReport r;
  r.source = dataset.describe();
  r.classes = dataset.class_names();
  r.per_class.assign(r.classes.size(), 0);
  r.samples = dataset.size();
  const unsigned int threads =
      options.threads > 0 ? options.threads : usable_cpus();
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::mutex mu; // guards r.per_class, r.bad and the shapes
  std::int64_t min_h = std::numeric_limits<std::int64_t>::max(), min_w = min_h,
               max_h = 0, max_w = 0, channels = 0;
  const auto* encoded = options.decode == Decode::Full
      ? nullptr
      : dynamic_cast<const EncodedImages*>(&dataset);
  AugmentSpec spec;
  spec.mode = AugmentSpec::Mode::Train;
  spec.out_h = spec.out_w = options.size;
  std::vector<double> psnr;
  DecodeComparison compared;
  const auto work = [&] {
    for (std::size_t i = next++; i < r.samples; i = next++) {
      try {
        const Sample s = dataset.get(i);
        double db = -1;
        CropDecoded how;
        if (encoded != nullptr) {
          const EncodedSample e = encoded->encoded(i);
          if (sniff_image_format(e.bytes) == ImageFormat::Jpeg) {
            db = crop_decode_psnr(
                e,
                {encoded->decode_options(), spec, options.decode},
                sample_seed(0, 0, i),
                how);
          }
        }
        std::lock_guard<std::mutex> lock(mu);
        if (db >= 0) {
          psnr.push_back(db);
          compared.regions += how.region;
          compared.scaled += how.scale_eighths < 8;
        }
        if (s.label >= 0 &&
            static_cast<std::size_t>(s.label) < r.per_class.size()) {
          ++r.per_class[static_cast<std::size_t>(s.label)];
        } else {
          r.bad.push_back(
              {i, "label " + std::to_string(s.label) + " out of range"});
        }
        channels = s.image.size(0);
        min_h = std::min(min_h, s.image.size(1));
        min_w = std::min(min_w, s.image.size(2));
        max_h = std::max(max_h, s.image.size(1));
        max_w = std::max(max_w, s.image.size(2));
      } catch (const DataError& e) {
        std::lock_guard<std::mutex> lock(mu);
        r.bad.push_back({i, e.what()});
      }
      ++done;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned int t = 0; t < threads; ++t) {
    pool.emplace_back(work);
  }
  Progress progress("check", r.samples, options.progress);
  while (done < r.samples) {
    progress.update(done);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& t : pool) {
    t.join();
  }
  progress.finish(std::to_string(r.bad.size()) + " bad");
  std::sort(
      r.bad.begin(), r.bad.end(), [](const BadSample& a, const BadSample& b) {
        return a.index < b.index;
      });
  if (encoded != nullptr) {
    compared.images = psnr.size();
    if (!psnr.empty()) {
      std::sort(psnr.begin(), psnr.end());
      compared.psnr_min = psnr.front();
      compared.psnr_median = psnr[psnr.size() / 2];
    }
    r.decode = compared;
  }
  if (max_h > 0) {
    r.min_shape = {channels, min_h, min_w};
    r.max_shape = {channels, max_h, max_w};
  }
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return r;
}

nlohmann::json to_json(const DataCheckReport& r) {
  auto bad = nlohmann::json::array();
  for (const auto& b : r.bad) {
    bad.push_back({{"index", b.index}, {"error", b.error}});
  }
  nlohmann::json decode = nullptr;
  if (r.decode) {
    decode = {
        {"images", r.decode->images},
        {"regions", r.decode->regions},
        {"scaled", r.decode->scaled},
        {"psnr_db_min", r.decode->psnr_min},
        {"psnr_db_median", r.decode->psnr_median}};
  }
  return {
      {"source", r.source},
      {"decode_vs_full", decode},
      {"samples", r.samples},
      {"classes", r.classes},
      {"per_class", r.per_class},
      {"bad_samples", bad},
      {"min_size",
       {r.min_shape.channels, r.min_shape.height, r.min_shape.width}},
      {"max_size",
       {r.max_shape.channels, r.max_shape.height, r.max_shape.width}},
      {"seconds", r.seconds}};
}

} // namespace hotloop::data
