// hotloop._hotloop.Loader: the CLI's data specs and loader (data/loader.h)
// for a Python loop. Batches cross as torch tensors without copies; the GIL is
// released while the loader opens data, decodes and waits.

#include <mutex>

#include <ATen/ops/alias.h>
#include <fmt/format.h>

#include "bindings.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/loader.h"
#include "hotloop/errors.h"

namespace hotloop::python {

namespace {

struct OutputOptions {
  // Images: float32 or bfloat16 (normalized), or uint8 (as decoded).
  at::ScalarType dtype = at::kFloat;
  bool channels_last = false;
};

class Loader {
 public:
  Loader(
      const std::string& spec,
      const std::string& split,
      data::LoaderOptions options,
      OutputOptions output)
      : output_(output) {
    options.normalize = output.dtype != at::kByte;
    const data::DataSpec parsed = data::parse_data_spec(spec);
    options.warn_bad_samples = false; // stats() names them
    seed_ = options.seed;
    batch_size_ = options.batch_size;
    rank_ = options.rank;
    world_size_ = options.world_size;
    dataset_ =
        data::open_dataset(parsed, data::parse_split(split), options.seed);
    loader_ = data::make_loader(dataset_, std::move(options));
  }

  std::size_t size() const {
    return loader_->batches_per_epoch();
  }

  // The epoch the next pass reads. A loaded state for this very epoch keeps
  // its position (load_state_dict, then set_epoch(saved epoch) in a loop).
  void set_epoch(std::size_t epoch) {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!(loaded_ && epoch == epoch_)) {
      start_batch_ = 0;
      loaded_ = false;
    }
    epoch_ = epoch;
    in_epoch_ = false;
  }

  // Begins a pass: at a loaded state's position, else at the start of the
  // epoch set. A pass left before its end (a break) counts as its epoch done:
  // the next pass begins the next epoch.
  void start() {
    const std::lock_guard<std::mutex> lock(mu_);
    if (in_epoch_) {
      ++epoch_;
      start_batch_ = 0;
    }
    begin_pass();
  }

  // (images or inputs, labels or targets), or nullopt at the epoch's end
  // (the next start() is the next epoch's, unless set_epoch says otherwise).
  std::optional<std::pair<at::Tensor, at::Tensor>> next() {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!in_epoch_) {
      begin_pass();
    }
    std::optional<data::Batch> b = loader_->next();
    if (!b) {
      in_epoch_ = false;
      ++epoch_;
      return std::nullopt;
    }
    at::Tensor images = std::move(b->images);
    if (images.is_floating_point() && output_.dtype != images.scalar_type()) {
      images = images.to(output_.dtype);
    }
    if (output_.channels_last && images.dim() == 4) {
      images = images.contiguous(at::MemoryFormat::ChannelsLast);
    }
    // Python gets its own tensor over the batch's memory: the CPU delivery
    // reuses a batch's memory once nothing else holds it (host_transfer.cpp),
    // and torch keeps a dropped Python tensor's object alive, still holding its
    // tensor, as long as C++ holds that tensor too, so a batch handed over
    // as it is would never come free (a new 38 MB allocation, page-faulted
    // afresh, for every batch of photos at 224 px).
    images = at::alias(images);
    return std::make_pair(std::move(images), std::move(b->labels));
  }

  double last_wait_seconds() const {
    return loader_->last_wait_seconds();
  }

  py::dict state_dict() const {
    // Inside an epoch: the next batch of it; between epochs, or after an
    // epoch's last batch: the next epoch's start.
    std::size_t epoch = 0;
    std::size_t next_batch = 0;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      epoch = epoch_;
      next_batch = start_batch_;
      if (in_epoch_) {
        std::tie(epoch, next_batch) = loader_->position();
      }
    }
    if (next_batch >= size()) {
      ++epoch;
      next_batch = 0;
    }
    py::dict d;
    d["epoch"] = epoch;
    d["next_batch"] = next_batch;
    d["seed"] = seed_;
    d["batch_size"] = batch_size_;
    d["world_size"] = world_size_;
    d["rank"] = rank_;
    return d;
  }

  void load_state_dict(const py::dict& d) {
    auto need = [&](const char* key) {
      if (!d.contains(key)) {
        throw UsageError(fmt::format(
            "hotloop.Loader.load_state_dict: the state has no '{}' (it is not one Loader.state_dict() wrote)",
            key));
      }
      return d[key];
    };
    const auto seed = need("seed").cast<std::uint64_t>();
    const auto batch = need("batch_size").cast<std::size_t>();
    const auto world = need("world_size").cast<int>();
    if (seed != seed_ || batch != batch_size_ || world != world_size_) {
      throw UsageError(
          fmt::format(
              "hotloop.Loader.load_state_dict: the state is of a loader with seed {}, batch_size {}, world_size {}; this one has {}, {}, {}",
              seed,
              batch,
              world,
              seed_,
              batch_size_,
              world_size_),
          "resume with the loader options the state was saved with (the order of the samples depends on them)");
    }
    const auto epoch = need("epoch").cast<std::size_t>();
    const auto next_batch = need("next_batch").cast<std::size_t>();
    if (next_batch > size()) {
      throw UsageError(fmt::format(
          "hotloop.Loader.load_state_dict: next_batch {} is past the epoch's {} batches",
          next_batch,
          size()));
    }
    const std::lock_guard<std::mutex> lock(mu_);
    epoch_ = epoch;
    start_batch_ = next_batch;
    loaded_ = true;
    in_epoch_ = false;
  }

  py::dict stats() const {
    const data::LoaderStats s = loader_->stats();
    py::dict d;
    d["batches"] = s.batches;
    d["samples"] = s.samples;
    d["bad_samples"] = s.bad_samples;
    d["bad_sample_names"] = s.bad_sample_names;
    d["wait_seconds"] = s.wait_seconds;
    d["buffers_allocated"] = s.buffers_allocated;
    d["decode_seconds"] = s.decode_seconds;
    d["decoded_samples"] = s.decoded_samples;
    // Samples per second of one decode thread's busy time.
    d["decode_rate"] = s.decode_seconds > 0
        ? static_cast<double>(s.decoded_samples) / s.decode_seconds
        : 0.0;
    if (const auto* l = dynamic_cast<const data::Loader*>(loader_.get())) {
      d["resident"] = l->resident();
    }
    return d;
  }

  py::dict info() const {
    py::dict d;
    d["size"] = dataset_->size();
    d["classes"] = dataset_->class_names();
    d["describe"] = dataset_->describe();
    if (const auto shape = dataset_->shape()) {
      d["shape"] = py::make_tuple(shape->channels, shape->height, shape->width);
    } else {
      d["shape"] = py::none();
    }
    return d;
  }

 private:
  OutputOptions output_;
  std::shared_ptr<const data::Dataset> dataset_;
  std::unique_ptr<data::EpochLoader> loader_;
  std::uint64_t seed_ = 0;
  std::size_t batch_size_ = 0;
  int rank_ = 0;
  int world_size_ = 1;
  // Starts epoch_ at start_batch_ (under mu_).
  void begin_pass() {
    loader_->start_epoch(epoch_, start_batch_);
    start_batch_ = 0;
    loaded_ = false;
    in_epoch_ = true;
  }

  // The pass's state; next() holds it while it waits (without the GIL), so
  // that a state_dict() from another thread sees a batch's boundary.
  mutable std::mutex mu_;
  std::size_t epoch_ = 0;
  std::size_t start_batch_ = 0;
  bool loaded_ = false; // start_batch_ is a loaded state's
  bool in_epoch_ = false;
};

// "float32", "bfloat16", "uint8" (the package passes torch.dtype's name).
at::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32") {
    return at::kFloat;
  }
  if (name == "bfloat16") {
    return at::kBFloat16;
  }
  if (name == "uint8") {
    return at::kByte;
  }
  throw UsageError(fmt::format(
      "hotloop.Loader: dtype {} is not one the loader gives (torch.float32, torch.bfloat16, torch.uint8)",
      name));
}

template <typename E, std::size_t N>
E named(const Named<E> (&table)[N], const std::string& text, const char* arg) {
  return parse_named<E>(table, text, arg);
}

} // namespace

void bind_loader(py::module_& m) {
  py::class_<Loader>(m, "Loader")
      .def(
          py::init([](const std::string& spec,
                      const std::string& split,
                      std::size_t batch_size,
                      unsigned int workers,
                      std::size_t prefetch,
                      bool shuffle,
                      bool drop_last,
                      bool train,
                      const std::string& augment,
                      const std::string& augment_device,
                      const std::string& decode,
                      std::int64_t size,
                      int channels,
                      std::uint64_t seed,
                      int rank,
                      int world_size,
                      const std::string& on_bad_sample,
                      const std::string& resident,
                      const std::string& device,
                      std::vector<float> mean,
                      std::vector<float> std_dev,
                      std::int64_t context,
                      std::size_t max_samples,
                      const std::string& dtype,
                      bool channels_last) {
            data::LoaderOptions o;
            o.batch_size = batch_size;
            o.workers = workers;
            o.prefetch_batches = prefetch;
            o.shuffle = shuffle;
            o.drop_last = drop_last;
            o.train = train;
            o.augment = named(data::kAugmentNames, augment, "augment");
            o.augment_on_device = named(
                data::kAugmentDeviceNames, augment_device, "augment_device");
            o.decode = named(data::kDecodeNames, decode, "decode");
            o.size = size;
            o.channels = channels;
            o.seed = seed;
            o.rank = rank;
            o.world_size = world_size;
            o.on_bad_sample =
                named(data::kBadSampleNames, on_bad_sample, "on_bad_sample");
            o.resident = named(data::kResidentNames, resident, "resident");
            o.device = c10::Device(device);
            o.mean = std::move(mean);
            o.std = std::move(std_dev);
            o.context = context;
            o.max_samples = max_samples;
            py::gil_scoped_release no_gil; // opening checks the files
            return std::make_unique<Loader>(
                spec,
                split,
                std::move(o),
                OutputOptions{parse_dtype(dtype), channels_last});
          }),
          py::arg("spec"),
          py::arg("split"),
          py::arg("batch_size"),
          py::arg("workers"),
          py::arg("prefetch"),
          py::arg("shuffle"),
          py::arg("drop_last"),
          py::arg("train"),
          py::arg("augment"),
          py::arg("augment_device"),
          py::arg("decode"),
          py::arg("size"),
          py::arg("channels"),
          py::arg("seed"),
          py::arg("rank"),
          py::arg("world_size"),
          py::arg("on_bad_sample"),
          py::arg("resident"),
          py::arg("device"),
          py::arg("mean"),
          py::arg("std_dev"),
          py::arg("context"),
          py::arg("max_samples"),
          py::arg("dtype"),
          py::arg("channels_last"))
      .def("__len__", &Loader::size)
      .def("set_epoch", &Loader::set_epoch)
      .def("start", &Loader::start, py::call_guard<py::gil_scoped_release>())
      .def(
          "next",
          [](Loader& l) -> py::object {
            std::optional<std::pair<at::Tensor, at::Tensor>> b;
            {
              py::gil_scoped_release no_gil;
              b = l.next();
            }
            if (!b) {
              return py::none();
            }
            return py::make_tuple(b->first, b->second);
          })
      .def("last_wait_seconds", &Loader::last_wait_seconds)
      .def("state_dict", &Loader::state_dict)
      .def("load_state_dict", &Loader::load_state_dict)
      .def("stats", &Loader::stats)
      .def("info", &Loader::info);
}

} // namespace hotloop::python
