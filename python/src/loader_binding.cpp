// hotloop._hotloop.Loader: the CLI's data specs and loader (data/loader.h)
// for a Python loop. Batches cross as torch tensors without copies; the GIL is
// released while the loader opens data, decodes and waits.

#include <ATen/ops/alias.h>
#include <fmt/format.h>

#include "bindings.h"
#include "hotloop/data/data_spec.h"
#include "hotloop/data/loader.h"
#include "hotloop/data/resumable_passes.h"
#include "hotloop/data/tokens/instructions.h"
#include "hotloop/data/tokens/token_data.h"
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
      const std::string& tokenizer,
      const std::string& split,
      data::LoaderOptions options,
      OutputOptions output)
      : output_(output) {
    options.normalize = output.dtype != at::kByte;
    if (options.normalize) {
      options.dtype = output.dtype; // the loader writes them so
    }
    options.channels_last = output.channels_last;
    data::DataSpec parsed = data::parse_data_spec(spec);
    parsed.tokenizer_folder = tokenizer; // text: and instruct: in its tokens
    parsed.chat_template = options.chat_template;
    parsed.max_image_pixels = options.max_image_pixels;
    options.warn_bad_samples = false; // stats() names them
    dataset_ =
        data::open_dataset(parsed, data::parse_split(split), options.seed);
    const data::LoaderOptions kept = options;
    passes_ = std::make_unique<data::ResumablePasses>(
        data::make_loader(dataset_, std::move(options)), kept);
  }

  std::size_t size() const {
    return passes_->batches_per_epoch();
  }

  // Passes, epochs and the resumable position: data/resumable_passes.h.
  void set_epoch(std::size_t epoch) {
    passes_->set_epoch(epoch);
  }
  void start() {
    passes_->start();
  }

  // (images or inputs, labels or targets), with positions for packed rows
  // (best-fit), or nullopt at the epoch's end.
  std::optional<std::vector<at::Tensor>> next() {
    std::optional<data::Batch> b = passes_->next();
    if (!b) {
      return std::nullopt;
    }
    at::Tensor images = std::move(b->images);
    if (output_.channels_last && images.dim() == 4) { // uint8 batches
      images = images.contiguous(at::MemoryFormat::ChannelsLast);
    }
    // Python gets its own tensor over the batch's memory: the CPU loader
    // reuses a batch's memory once nothing else holds it (loader.cpp),
    // and torch keeps a dropped Python tensor's object alive, still holding its
    // tensor, as long as C++ holds that tensor too, so a batch handed over
    // as it is would never come free (a new 38 MB allocation, page-faulted
    // afresh, for every batch of photos at 224 px).
    images = at::alias(images);
    std::vector<at::Tensor> out = {std::move(images), std::move(b->labels)};
    if (b->positions.defined()) {
      out.push_back(std::move(b->positions));
    }
    return out;
  }

  double last_wait_seconds() const {
    return passes_->loader().last_wait_seconds();
  }

  py::dict state_dict() const {
    const data::PassPosition p = passes_->position();
    py::dict d;
    d["epoch"] = p.epoch;
    d["next_batch"] = p.next_batch;
    d["seed"] = p.seed;
    d["batch_size"] = p.batch_size;
    d["world_size"] = p.world_size;
    d["rank"] = p.rank;
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
    data::PassPosition p;
    p.seed = need("seed").cast<std::uint64_t>();
    p.batch_size = need("batch_size").cast<std::size_t>();
    p.world_size = need("world_size").cast<int>();
    p.epoch = need("epoch").cast<std::size_t>();
    p.next_batch = need("next_batch").cast<std::size_t>();
    passes_->load(p);
  }

  py::dict stats() const {
    const data::LoaderStats s = passes_->loader().stats();
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
    if (const auto* l = dynamic_cast<const data::Loader*>(&passes_->loader())) {
      d["resident"] = l->resident();
      d["feed_reason"] = l->feed_reason();
    }
    return d;
  }

  py::dict info() const {
    py::dict d;
    d["size"] = dataset_->size();
    d["classes"] = dataset_->class_names();
    d["describe"] = dataset_->describe();
    // The tokenizer token files came with, for a Run to keep (run_folder.h).
    const auto* tokens =
        dynamic_cast<const data::TokenDataset*>(dataset_.get());
    d["tokenizer_files"] =
        tokens ? tokens->tokenizer_files() : std::vector<std::string>{};
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
  std::unique_ptr<data::ResumablePasses> passes_;
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
  m.attr("DEFAULT_MAX_IMAGE_PIXELS") = data::kDefaultMaxImagePixels;
  py::class_<Loader>(m, "Loader")
      .def(
          py::init([](const std::string& spec,
                      const std::string& tokenizer,
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
                      const std::string& decode_device,
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
                      const std::string& packing,
                      const std::string& chat_template,
                      std::int64_t max_image_pixels,
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
            o.decode_on_device = named(
                data::kAugmentDeviceNames, decode_device, "decode_device");
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
            o.packing = named(data::kPackingNames, packing, "packing");
            data::parse_chat_template(chat_template); // UsageError early
            o.chat_template = chat_template;
            o.max_image_pixels = max_image_pixels;
            py::gil_scoped_release no_gil; // opening checks the files
            return std::make_unique<Loader>(
                spec,
                tokenizer,
                split,
                std::move(o),
                OutputOptions{parse_dtype(dtype), channels_last});
          }),
          py::arg("spec"),
          py::arg("tokenizer"),
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
          py::arg("decode_device"),
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
          py::arg("packing"),
          py::arg("chat_template"),
          py::arg("max_image_pixels"),
          py::arg("dtype"),
          py::arg("channels_last"))
      .def("__len__", &Loader::size)
      .def("set_epoch", &Loader::set_epoch)
      .def("start", &Loader::start, py::call_guard<py::gil_scoped_release>())
      .def(
          "next",
          [](Loader& l) -> py::object {
            std::optional<std::vector<at::Tensor>> b;
            {
              py::gil_scoped_release no_gil;
              b = l.next();
            }
            if (!b) {
              return py::none();
            }
            py::tuple out(b->size());
            for (std::size_t i = 0; i < b->size(); ++i) {
              out[i] = py::cast((*b)[i]);
            }
            return out;
          })
      .def("last_wait_seconds", &Loader::last_wait_seconds)
      .def("state_dict", &Loader::state_dict)
      .def("load_state_dict", &Loader::load_state_dict)
      .def("stats", &Loader::stats)
      .def("info", &Loader::info);
}

} // namespace hotloop::python
