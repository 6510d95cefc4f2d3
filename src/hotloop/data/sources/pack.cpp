#include "hotloop/data/sources/pack.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hotloop/core/cpus.h"
#include "hotloop/core/progress.h"
#include "hotloop/core/random.h"
#include "hotloop/core/units.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/file_io.h"
#include "hotloop/data/sources/image_folder.h"
#include "hotloop/data/sources/tar.h"
#include "hotloop/data/sources/webdataset.h"
#include "hotloop/errors.h"

namespace hotloop::data {
namespace {

namespace fs = std::filesystem;

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string().substr(1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) {
    return std::tolower(c);
  });
  return ext;
}

// The images at positions [begin, end) of `order`, read and packed
// (pack_image.h) on `threads` threads: resizing is the slow part.
std::vector<PackedImage> pack_window(
    const ImageFolder& folder,
    const std::vector<std::size_t>& order,
    std::size_t begin,
    std::size_t end,
    const PackOptions& o,
    unsigned int threads) {
  std::vector<PackedImage> out(end - begin);
  std::atomic<std::size_t> next{begin};
  std::mutex mu;
  std::exception_ptr error; // the first, rethrown after the join
  const auto work = [&] {
    for (std::size_t pos = next++; pos < end; pos = next++) {
      try {
        const std::string& path = folder.path(order[pos]);
        out[pos - begin] =
            pack_image(read_file(path), path, lower_extension(path), o.image);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mu);
        if (!error) {
          error = std::current_exception();
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned int t = 1; t < threads; ++t) {
    pool.emplace_back(work);
  }
  work();
  for (auto& t : pool) {
    t.join();
  }
  if (error) {
    std::rethrow_exception(error);
  }
  return out;
}

PackedSplit pack_split(
    const ImageFolder& folder,
    Split split,
    const PackOptions& o) {
  PackedSplit result;
  result.split = to_string(split);
  const auto order = shuffled_order(
      folder.size(), o.seed * 3 + static_cast<std::uint64_t>(split));
  Progress progress(
      fmt::format("pack {}", result.split), folder.size(), o.progress);
  std::unique_ptr<TarWriter> shard;
  const auto open_shard = [&] {
    if (shard) {
      shard->close();
    }
    const std::string name =
        fmt::format("{}-{:06d}.tar", result.split, result.shards.size());
    shard = std::make_unique<TarWriter>((fs::path(o.out) / name).string());
    result.shards.push_back(name);
  };
  // Copying bytes needs no threads; resizing and rewriting do.
  const bool rewrites = o.image.max_side > 0 || o.image.restart_markers;
  const unsigned int threads = !rewrites ? 1
      : o.threads > 0                    ? o.threads
                                         : usable_cpus();
  const std::size_t window = std::size_t{16} * threads;
  for (std::size_t begin = 0; begin < order.size(); begin += window) {
    const std::size_t end = std::min(order.size(), begin + window);
    const std::vector<PackedImage> images =
        pack_window(folder, order, begin, end, o, threads);
    for (std::size_t pos = begin; pos < end; ++pos) {
      const PackedImage& image = images[pos - begin];
      const std::string label = std::to_string(folder.get_label(order[pos]));
      const std::uint64_t sample_bytes =
          3 * 512 + image.bytes.size() + 512; // headers and padding, roughly
      if (!shard ||
          (shard->bytes_written() > 0 &&
           shard->bytes_written() + sample_bytes > o.shard_bytes)) {
        open_shard();
      }
      const std::string key = fmt::format("{:08d}", pos);
      shard->add(key + "." + image.extension, image.bytes);
      shard->add(
          key + ".cls",
          std::span(
              reinterpret_cast<const std::uint8_t*>(label.data()),
              label.size()));
      result.bytes += image.bytes.size();
      result.resized += image.resized;
      result.remarked += image.remarked;
      result.sources.push_back(folder.path(order[pos]));
      ++result.samples;
      progress.update(
          pos + 1, fmt::format("{} shard(s)", result.shards.size()));
    }
  }
  if (shard) {
    shard->close();
  }
  progress.finish(fmt::format(
      "{} shard(s), {}", result.shards.size(), format_bytes(result.bytes)));
  return result;
}

void write_index(const PackOptions& o, const PackResult& r) {
  nlohmann::json splits = nlohmann::json::object();
  for (const auto& s : r.splits) {
    splits[s.split] = {
        {"samples", s.samples},
        {"bytes", s.bytes},
        {"resized", s.resized},
        {"remarked", s.remarked},
        {"shards", s.shards}};
  }
  const nlohmann::json index = {
      {"format", "hotloop-wds-1"},
      {"source", o.from},
      {"seed", o.seed},
      {"max_side", o.image.max_side}, // 0: none resized
      {"quality", o.image.quality},
      // JPEGs written with a restart marker per MCU row (resized ones, and
      // kept ones rewritten losslessly), the loader's crops start there
      {"restart_markers", o.image.restart_markers},
      {"classes", r.classes},
      {"splits", splits}};
  const fs::path tmp = fs::path(o.out) / "index.json.tmp";
  {
    std::ofstream out(tmp);
    out << index.dump(2) << "\n";
    if (!out) {
      throw DataError(
          fmt::format("{}: write failed", tmp.string()),
          "check free disk space");
    }
  }
  fs::rename(tmp, fs::path(o.out) / "index.json");
}

} // namespace

std::vector<std::size_t> shuffled_order(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::uint64_t state = seed;
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(splitmix64(state) % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

PackResult pack(const PackOptions& o) {
  const DataSpec spec = parse_data_spec(o.from);
  if (spec.kind != DataSpec::Kind::Folder) {
    throw UsageError(
        fmt::format("pack --from '{}': only folder:DIR can be packed", o.from),
        "pack reads DIR/{train,val,test}/<class>/<image> folders");
  }
  if (o.image.max_side < 0 || o.image.quality < 1 || o.image.quality > 100) {
    throw UsageError(
        fmt::format(
            "pack --max-side {} --quality {}: the side must be 0 (keep every image) or more, the quality 1 to 100",
            o.image.max_side,
            o.image.quality),
        "e.g. --max-side 512 --quality 90 for training at 224 px");
  }
  if (o.shard_bytes < 4096) {
    throw UsageError(
        fmt::format("pack --shard-size {}: too small", o.shard_bytes),
        "use e.g. 256MiB");
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) {
    throw DataError(fmt::format(
        "{}: cannot create the output folder: {}", o.out, ec.message()));
  }
  PackResult result;
  for (const Split split : {Split::Train, Split::Val, Split::Test}) {
    if (split != Split::Train &&
        !fs::is_directory(fs::path(spec.path) / to_string(split), ec)) {
      continue; // val and test are optional
    }
    const ImageFolder folder(spec.path, split);
    if (result.classes.empty()) {
      result.classes = folder.class_names();
    }
    result.splits.push_back(pack_split(folder, split, o));
  }
  write_index(o, result);
  if (o.verify) {
    for (const auto& s : result.splits) {
      const Split split = parse_split(s.split);
      const WebDataset wds(o.out, split);
      if (wds.size() != s.samples) {
        result.bad_samples.push_back(fmt::format(
            "{}: {} samples read back, {} written",
            s.split,
            wds.size(),
            s.samples));
      }
      Progress progress(
          fmt::format("verify {}", s.split), wds.size(), o.progress);
      for (std::size_t i = 0; i < wds.size(); ++i) {
        try {
          wds.get(i);
          ++result.verified;
        } catch (const DataError& e) {
          // The key is the sample's position in the split: name the source file
          // too, which is what to fix.
          const std::string key =
              wds.sample_name(i).substr(wds.sample_name(i).rfind(':') + 1);
          const std::size_t pos = std::stoul(key);
          result.bad_samples.push_back(fmt::format(
              "{} (from {})",
              e.what(),
              pos < s.sources.size() ? s.sources[pos] : std::string("?")));
        }
        progress.update(i + 1);
      }
      progress.finish();
    }
  }
  return result;
}

} // namespace hotloop::data
