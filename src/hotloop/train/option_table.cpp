// The training options, one entry each (option_table.h says what an entry
// holds). Cross-option rules (batch divisible by the micro-batch, Nesterov
// needs SGD with momentum, ...) are in TrainerOptions::validate().

#include "hotloop/train/option_table.h"

#include <fmt/ranges.h>

#include "hotloop/data/tokens/instructions.h"
#include "hotloop/data/tokens/packing.h"
#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/fine_tune.h"
#include "hotloop/train/options.h"
#include "option_builders.h"

namespace hotloop::train {

namespace {

using namespace options_detail;
using O = TrainerOptions;
using M = model::ModelOptions;
using Img = model::ImageModelOptions;
using Lm = model::LmShapeOptions;
using Exp = model::ExportedModelOptions;
using L = data::LoaderOptions;
using Opt = OptimizerOptions;
using Sch = ScheduleOptions;

std::string check_device(const std::string& d) {
  return d == "auto" || d == "cpu" || d.starts_with("cuda")
      ? std::string()
      : "expected auto, cpu, cuda or cuda:N";
}

std::string check_chat_template(const std::string& text) {
  try {
    data::parse_chat_template(text);
    return {};
  } catch (const UsageError&) {
    return std::string("expected ") + data::kChatTemplateNames;
  }
}

std::string check_document_mask(const std::string& text) {
  try {
    data::parse_document_mask(text);
    return {};
  } catch (const UsageError&) {
    return "expected off, eos or a token id";
  }
}

// --freeze fills two fields: the backbone switch and the name globs.
TrainerOption freeze_option() {
  TrainerOption o;
  o.name = "freeze";
  o.section = "Fine-tuning";
  o.help =
      "backbone (train the head only), none, or name globs: 'features.*,classifier.0.*'";
  o.get = [](const O& t) {
    return nlohmann::json(
        t.freeze_backbone ? std::string("backbone")
            : t.freeze_patterns.empty()
            ? std::string("none")
            : fmt::format("{}", fmt::join(t.freeze_patterns, ",")));
  };
  o.set = [](O& t, const std::string& v) {
    const model::Freeze f = model::parse_freeze(v);
    t.freeze_backbone = f == model::Freeze::Backbone;
    t.freeze_patterns = f == model::Freeze::Patterns
        ? model::freeze_patterns(v)
        : std::vector<std::string>{};
  };
  o.check = [](const O&) { return std::string(); };
  return o;
}

// --lora-targets: projection names, comma-separated; "all": every one.
TrainerOption lora_targets_option() {
  TrainerOption o;
  o.name = "lora-targets";
  o.section = "Fine-tuning";
  o.help = fmt::format(
      "With --lora-rank: the projections to adapt, comma-separated ({}), or all",
      model::lora_targets_help());
  o.get = [](const O& t) {
    const auto& v = t.model.lora.targets;
    return nlohmann::json(
        v.empty() ? std::string("all") : fmt::format("{}", fmt::join(v, ",")));
  };
  o.set = [](O& t, const std::string& v) {
    std::vector<std::string> names;
    if (v != "all") {
      std::size_t start = 0;
      while (start <= v.size()) {
        const std::size_t comma = std::min(v.find(',', start), v.size());
        names.push_back(v.substr(start, comma - start));
        if (names.back().empty()) {
          throw UsageError(
              fmt::format("--lora-targets '{}': an empty name", v),
              "expected all, or comma-separated projection names such as q_proj,v_proj");
        }
        start = comma + 1;
      }
    }
    t.model.lora.targets = std::move(names);
  };
  o.check = [](const O&) { return std::string(); };
  return o;
}

// What is trained. The model as built is also recorded whole
// (config.json's "model") and must match on resume.
std::vector<TrainerOption> model_options() {
  const char* section = "Model";
  return {
      text<O>(
          "model",
          section,
          field(&O::model, &M::name),
          model::model_help() +
              " (docs/models.md, docs/bring-your-own-model.md)")
          .kept_on_resume(),
      text<O>(
          "head",
          section,
          field(&O::model, &M::exported, &Exp::head),
          "torchscript: the classifier head's module name (replaced when the data has another class count; --freeze backbone and --head-lr use it); empty: the module owning the last 2-D weight")
          .kept_on_resume(),
      number<O, std::int64_t>(
          "num-classes",
          section,
          field(&O::model, &M::image, &Img::num_classes),
          "Outputs; 0: the data set's class count",
          at_least(0))
          .kept_on_resume(),
      number<O, std::int64_t>(
          "in-channels",
          section,
          field(&O::model, &M::image, &Img::in_channels),
          "Input channels; 0: the data set's",
          at_least(0))
          .kept_on_resume(),
      boolean<O>(
          "zero-init-residual",
          section,
          field(&O::model, &M::image, &Img::zero_init_residual),
          "Zero the last BatchNorm of each residual block")
          .kept_on_resume(),
      number<O, std::int64_t>(
          "layers",
          section,
          field(&O::model, &M::lm, &Lm::layers),
          "Language models: transformer blocks; 0: the size's",
          at_least(0))
          .kept_on_resume(),
      number<O, std::int64_t>(
          "heads",
          section,
          field(&O::model, &M::lm, &Lm::heads),
          "Language models: attention heads; 0: the size's (Llama: the size's key/value heads when they divide it, else as many)",
          at_least(0))
          .kept_on_resume(),
      number<O, std::int64_t>(
          "width",
          section,
          field(&O::model, &M::lm, &Lm::width),
          "Language models: embedding width; 0: the size's (Llama: the MLP 8/3 of it)",
          at_least(0))
          .kept_on_resume(),
      number<O, std::int64_t>(
          "context",
          section,
          field(&O::model, &M::lm, &Lm::context),
          "Language models: tokens per sequence (the longest it reads); 0: the size's (hf:DIR: the model's positions up to 1024). torchscript on token data: required",
          at_least(0))
          .kept_on_resume(),
      number<O, std::int64_t>(
          "vocab",
          section,
          field(&O::model, &M::lm, &Lm::vocab),
          "Language models: vocabulary (GPT pads it to a multiple of 64 inside); 0: the size's or the data's, the larger",
          at_least(0))
          .kept_on_resume(),
  };
}

// How long, and how many samples per step.
std::vector<TrainerOption> length_options() {
  const char* section = "Length and batch";
  return {
      number<O, std::int64_t>(
          "epochs",
          section,
          field(&O::epochs),
          "Epochs (ignored when --steps is set)",
          at_least(0))
          .set_by_recipe(),
      number<O, std::int64_t>(
          "steps",
          section,
          field(&O::steps),
          "Optimizer steps; 0: --epochs decides",
          at_least(0)),
      number<O, std::int64_t>(
          "batch",
          section,
          field(&O::batch),
          "Global batch per optimizer step",
          at_least(1))
          .kept_on_resume(),
      number<O, std::int64_t>(
          "micro-batch",
          section,
          field(&O::micro_batch),
          "Samples per forward/backward; 0: the whole batch (no accumulation)",
          at_least(0)),
  };
}

// Precision and device.
std::vector<TrainerOption> precision_options() {
  const char* section = "Precision and device";
  return {
      choice<O, Precision>(
          "precision",
          section,
          field(&O::precision),
          kPrecisionNames,
          "fp32, tf32, bf16 (autocast; CPU too) or fp16 (autocast + loss scaling; CUDA); a language model's recipe: bf16 on a GPU of compute capability 8.0 and up")
          .kept_on_resume()
          .set_by_recipe(),
      choice<O, LossScaling>(
          "loss-scaling",
          section,
          field(&O::loss_scaling),
          kLossScalingNames,
          "Dynamic loss scaling: auto (fp16 only), on (any precision: overflow check and skip) or off")
          .kept_on_resume(),
      text<O>(
          "device",
          section,
          field(&O::device),
          "auto, cpu, cuda or cuda:N",
          check_device),
      number<O, int>(
          "threads",
          section,
          field(&O::threads),
          "CPU threads for the math; 0: the usable cores",
          at_least(0)),
      number<O, std::uint64_t>(
          "seed",
          section,
          field(&O::seed),
          "Seed: initialization, shuffle order, augmentation")
          .kept_on_resume(),
  };
}

// The optimizer.
std::vector<TrainerOption> optimizer_options() {
  const char* section = "Optimizer";
  return {
      choice<O, OptimizerKind>(
          "optimizer",
          section,
          field(&O::optimizer, &Opt::kind),
          kOptimizerNames,
          "sgd or adamw (its state counts in memory)")
          .set_by_recipe()
          .kept_on_resume(),
      number<O, double>(
          "lr",
          section,
          field(&O::schedule, &Sch::lr),
          "Peak learning rate",
          positive())
          .set_by_recipe()
          .kept_on_resume(),
      number<O, double>(
          "head-lr",
          section,
          field(&O::head_lr),
          "The head's learning rate; < 0: --lr")
          .kept_on_resume(),
      number<O, double>(
          "momentum",
          section,
          field(&O::optimizer, &Opt::momentum),
          "SGD momentum",
          in_range(0, 1))
          .set_by_recipe()
          .kept_on_resume(),
      boolean<O>(
          "nesterov",
          section,
          field(&O::optimizer, &Opt::nesterov),
          "SGD with Nesterov momentum")
          .set_by_recipe()
          .kept_on_resume(),
      number<O, double>(
          "beta1",
          section,
          field(&O::optimizer, &Opt::beta1),
          "AdamW's first-moment decay",
          in_range(0, 1))
          .kept_on_resume(),
      number<O, double>(
          "beta2",
          section,
          field(&O::optimizer, &Opt::beta2),
          "AdamW's second-moment decay",
          in_range(0, 1))
          .set_by_recipe()
          .kept_on_resume(),
      number<O, double>(
          "eps",
          section,
          field(&O::optimizer, &Opt::eps),
          "AdamW's epsilon",
          positive())
          .kept_on_resume(),
      number<O, double>(
          "weight-decay",
          section,
          field(&O::optimizer, &Opt::weight_decay),
          "L2 (SGD) or decoupled (AdamW) weight decay",
          at_least(0))
          .set_by_recipe()
          .kept_on_resume(),
      number<O, double>(
          "clip-grad-norm",
          section,
          field(&O::clip_grad_norm),
          "Clip the global gradient norm; 0: off",
          at_least(0))
          .set_by_recipe()
          .kept_on_resume(),
      number<O, double>(
          "clip-grad-value",
          section,
          field(&O::clip_grad_value),
          "Clamp each gradient element to [-V, V] after unscaling (torch.nn.utils.clip_grad_value_); 0: off",
          at_least(0))
          .kept_on_resume(),
      number<O, double>(
          "label-smoothing",
          section,
          field(&O::label_smoothing),
          "Cross-entropy label smoothing",
          in_range(0, 1))
          .set_by_recipe()
          .kept_on_resume(),
  };
}

// The learning-rate schedule.
std::vector<TrainerOption> schedule_options() {
  const char* section = "Schedule";
  return {
      choice<O, ScheduleKind>(
          "schedule",
          section,
          field(&O::schedule, &Sch::kind),
          kScheduleNames,
          "constant, cosine, step or onecycle")
          .set_by_recipe()
          .kept_on_resume(),
      number<O, std::int64_t>(
          "warmup-steps",
          section,
          field(&O::schedule, &Sch::warmup_steps),
          "Linear warmup (constant, cosine, step)",
          at_least(0))
          .set_by_recipe()
          .kept_on_resume(),
      number<O, double>(
          "min-lr",
          section,
          field(&O::schedule, &Sch::min_lr),
          "Cosine's final learning rate",
          at_least(0))
          .set_by_recipe()
          .kept_on_resume(),
      number<O, std::int64_t>(
          "step-size",
          section,
          field(&O::schedule, &Sch::step_size),
          "step: multiply the LR by --gamma every N steps",
          at_least(0))
          .kept_on_resume(),
      number<O, double>(
          "gamma",
          section,
          field(&O::schedule, &Sch::gamma),
          "step schedule's factor",
          positive())
          .kept_on_resume(),
      number<O, double>(
          "pct-start",
          section,
          field(&O::schedule, &Sch::pct_start),
          "onecycle: the share of the steps rising",
          [](const double& v) {
            return v > 0 && v < 1 ? std::string()
                                  : std::string("must be in (0, 1)");
          })
          .kept_on_resume(),
      number<O, double>(
          "div-factor",
          section,
          field(&O::schedule, &Sch::div_factor),
          "onecycle: start at lr / F",
          positive())
          .kept_on_resume(),
      number<O, double>(
          "final-div-factor",
          section,
          field(&O::schedule, &Sch::final_div_factor),
          "onecycle: end at the start's lr / F",
          positive())
          .kept_on_resume(),
  };
}

// Memory and speed.
std::vector<TrainerOption> speed_options() {
  const char* section = "Memory and speed";
  return {
      boolean<O>(
          "channels-last",
          section,
          field(&O::channels_last),
          "NHWC memory format for convolutions (true: faster on the CPU and with tensor cores)"),
      boolean<O>(
          "cudnn-benchmark",
          section,
          field(&O::cudnn_benchmark),
          "cuDNN's autotuner on CUDA"),
      choice<O, model::Checkpointing>(
          "activation-checkpointing",
          section,
          field(&O::activation_checkpointing),
          model::kCheckpointingNames,
          "What to recompute in backward instead of keeping: none, stages, all or blocks; by family: " +
              model::checkpointing_help()),
      choice<O, model::CpuConv>(
          "cpu-conv",
          section,
          field(&O::cpu_conv),
          model::kCpuConvNames,
          "Convolutions on the CPU: auto (im2col + GEMM where the output map is at most 4x4 pixels, oneDNN elsewhere), onednn, or gemm (wherever the layer allows)"),
      choice<O, CudaGraphs>(
          "cuda-graphs",
          section,
          field(&O::cuda_graphs),
          kCudaGraphsNames,
          "auto (capture the whole step as one CUDA graph when the run allows it, else eager with the reason logged), on (an error when it cannot) or off"),
      number<O, std::int64_t>(
          "readback-every",
          section,
          field(&O::readback_every),
          "Steps between reading losses back to the host, without waiting for the GPU (metrics lines and the non-finite check see them then); 1: every step, before the update; 0: 1 on the CPU, 16 on CUDA",
          at_least(0)),
      boolean<O>(
          "oom-recovery",
          section,
          field(&O::oom_recovery),
          "On out of memory: halve the micro-batch, double accumulation, redo the step"),
      number<O, double>(
          "memory-fraction",
          section,
          field(&O::memory_fraction),
          "Cap this process's share of the GPU's memory (0 < F <= 1); 0: no cap",
          in_range(0, 1, true)),
  };
}

// Fine-tuning.
std::vector<TrainerOption> fine_tune_options() {
  const char* section = "Fine-tuning";
  return {
      text<O>(
          "init",
          section,
          field(&O::init),
          "Start from these weights: .safetensors, a torch.save state_dict, or a Hugging Face model folder (without --model: that folder's model, hf:DIR)"),
      boolean<O>(
          "init-strict",
          section,
          field(&O::init_strict),
          "false: load what matches --init and report the rest"),
      freeze_option().kept_on_resume(),
      number<O, std::int64_t>(
          "lora-rank",
          section,
          field(&O::model, &M::lora, &model::LoraOptions::rank),
          "Language models: LoRA adapters of this rank on the projections, the base frozen (fp32 adapters; a bf16 run stores the frozen projections in bf16); 0: train every weight",
          at_least(0))
          .kept_on_resume(),
      number<O, double>(
          "lora-alpha",
          section,
          field(&O::model, &M::lora, &model::LoraOptions::alpha),
          "LoRA's scale numerator: updates are scaled by alpha / rank",
          positive())
          .kept_on_resume(),
      number<O, double>(
          "lora-dropout",
          section,
          field(&O::model, &M::lora, &model::LoraOptions::dropout),
          "Dropout on the adapters' input while training",
          in_range(0, 1))
          .kept_on_resume(),
      lora_targets_option().kept_on_resume(),
      text<O>(
          "lora-init",
          section,
          field(&O::lora_init),
          "With --lora-rank: start the adapters from a PEFT adapter folder's (adapter_config.json + adapter_model.safetensors; its rank, alpha and targets must be the run's); empty: A random, B zero"),
  };
}

// The run directory and checkpoints.
std::vector<TrainerOption> run_folder_options() {
  const char* section = "Run directory and checkpoints";
  return {
      text<O>(
          "out",
          section,
          field(&O::out_dir),
          "Run directory; empty: runs/<timestamp>"),
      number<O, std::int64_t>(
          "eval-every",
          section,
          field(&O::eval_every),
          "Evaluate every N steps; 0: each epoch's end",
          at_least(0)),
      number<O, std::int64_t>(
          "checkpoint-every",
          section,
          field(&O::checkpoint_every),
          "Checkpoint every N steps; 0: each epoch's end",
          at_least(0)),
      number<O, int>(
          "keep-checkpoints",
          section,
          field(&O::keep_checkpoints),
          "Checkpoints kept (the newest); 0: none written",
          at_least(0)),
      boolean<O>(
          "save-weights",
          section,
          field(&O::save_weights),
          "Write RUN/model.safetensors (the final weights) at the end"),
      text<O>(
          "resume",
          section,
          field(&O::resume),
          "auto (newest valid checkpoint in --out) or a checkpoint file"),
  };
}

// The loader.
std::vector<TrainerOption> loader_options() {
  const char* section = "Data loading";
  return {
      number<O, unsigned int>(
          "workers",
          section,
          field(&O::loader, &L::workers),
          "Decode threads; 0: the usable cores"),
      number<O, std::size_t>(
          "prefetch",
          section,
          field(&O::loader, &L::prefetch_batches),
          "Ready batches held ahead of the step",
          at_least(1)),
      number<O, std::int64_t>(
          "size",
          section,
          field(&O::loader, &L::size),
          "Input height and width; 0: the data's native size (224 for photos)",
          at_least(0))
          .kept_on_resume(),
      choice<O, data::Augment>(
          "augment",
          section,
          field(&O::loader, &L::augment),
          data::kAugmentNames,
          "default (random crop/flip) or none")
          .set_by_recipe()
          .kept_on_resume(),
      choice<O, bool>(
          "augment-device",
          section,
          field(&O::loader, &L::augment_on_device),
          data::kAugmentDeviceNames,
          "cpu (per sample, in the decode threads) or gpu (the whole batch on the GPU; needs --device cuda)"),
      choice<O, data::Decode>(
          "decode",
          section,
          field(&O::loader, &L::decode),
          data::kDecodeNames,
          "JPEG photos: auto (only the crop's region, at the smallest DCT scale that keeps it at least the output size), region (the crop's region at full size: a full decode's pixels) or full (the whole image)"),
      choice<O, bool>(
          "decode-device",
          section,
          field(&O::loader, &L::decode_on_device),
          data::kAugmentDeviceNames,
          "cpu (the decode threads, libjpeg) or gpu (folders' and shards' baseline JPEGs decoded by nvJPEG on the GPU, the crops resized there; progressive, CMYK and PNG files stay on the CPU; needs --device cuda)"),
      choice<O, data::Resident>(
          "resident",
          section,
          field(&O::loader, &L::resident),
          data::kResidentNames,
          "auto, on or off: decode the data set once into memory"),
      boolean<O>(
          "shuffle",
          section,
          field(&O::loader, &L::shuffle),
          "Shuffle the training samples each epoch (false: the data's own order, as for parity checks)"),
      choice<O, data::Packing>(
          "packing",
          section,
          field(&O::loader, &L::packing),
          data::kPackingNames,
          "Instruction data's examples into rows: best-fit (whole examples, longest first, each into the fullest row that holds it; positions restart and attention stays inside each example), wrap (one stream cut into windows; examples see the ones before them) or none (one example a row, padded)")
          .kept_on_resume(),
      text<O>(
          "document-mask",
          section,
          field(&O::loader, &L::document_mask),
          "Other token data (tokens:, text:): off, eos (the data's end-of-text token) or a token id: each window is cut into documents after that token; positions restart and attention stays inside each document, and the token after it is no target of it",
          check_document_mask)
          .kept_on_resume(),
      text<O>(
          "chat-template",
          section,
          field(&O::loader, &L::chat_template),
          "Instruction data's chat template: auto (the model folder's own Jinja template where it has one, else the built-in its tokenizer's added tokens choose), folder, chatml, llama3 or plain",
          check_chat_template)
          .kept_on_resume(),
      choice<O, data::BadSamplePolicy>(
          "on-bad-sample",
          section,
          field(&O::loader, &L::on_bad_sample),
          data::kBadSampleNames,
          "skip (count and log once) or fail"),
      number<O, std::int64_t>(
          "max-image-pixels",
          section,
          field(&O::loader, &L::max_image_pixels),
          "Folders and shards: an image whose header claims more pixels is a bad sample, refused before it is allocated (the default is 16384 x 16384; raise it for whole-slide or satellite images, up to 65535 x 65535; each decode thread may hold one such image)",
          in_range(1, static_cast<double>(data::kLargestMaxImagePixels), true)),
  };
}

// Data parallel (under torchrun, srun or hotloop launch).
std::vector<TrainerOption> parallel_options() {
  const char* section = "Data parallel";
  return {
      boolean<O>(
          "sync-batchnorm",
          section,
          field(&O::sync_batchnorm),
          "BatchNorm statistics over the global batch, not each rank's share (turns OOM recovery off: the collectives inside forward cannot be realigned after one rank fails)")
          .kept_on_resume(),
      boolean<O>(
          "overlap-allreduce",
          section,
          field(&O::overlap_allreduce),
          "Start each gradient bucket's all-reduce during backward as soon as its gradients are ready (false: all after backward)"),
      number<O, int>(
          "shard",
          section,
          field(&O::shard),
          "ZeRO stage: 0 keeps the whole model, gradients and optimizer state on every rank; 1 shards the optimizer state over the ranks (each holds 1/N of it); 2 also reduce-scatters the gradients into each rank's shard; 3 also shards the parameters of each block, gathered just before it runs (docs/parallel.md)",
          [](const int& v) {
            return v >= 0 && v <= 3 ? std::string()
                                    : std::string("must be 0, 1, 2 or 3");
          }),
      text<O>(
          "offload",
          section,
          field(&O::offload),
          "optimizer: keep the optimizer's state and do its update in host memory (pinned), the device holding neither (ZeRO-Offload; with --shard, each rank its shard's); none: on the training device",
          [](const std::string& v) {
            return v == "none" || v == "optimizer"
                ? std::string()
                : std::string("must be none or optimizer");
          }),
      number<O, double>(
          "bucket-mb",
          section,
          field(&O::bucket_mb),
          "Gradient bucket size in MiB",
          positive()),
      number<O, std::int64_t>(
          "reduces-in-flight",
          section,
          field(&O::reduces_in_flight),
          "--shard 2-3: gradient buckets reduce-scattered at once, each holding its whole gradients until done (a bucket more waits for the oldest); 0: every bucket's whole gradients live until the step's end (the most overlap, the whole model's gradients at the peak)",
          at_least(0)),
  };
}

// The sections in --help's order.
std::vector<TrainerOption> make_table() {
  std::vector<TrainerOption> table;
  for (auto* section :
       {&model_options,
        &length_options,
        &precision_options,
        &optimizer_options,
        &schedule_options,
        &speed_options,
        &fine_tune_options,
        &run_folder_options,
        &loader_options,
        &parallel_options}) {
    for (TrainerOption& o : section()) {
      table.push_back(std::move(o));
    }
  }
  return table;
}

} // namespace

const std::vector<TrainerOption>& trainer_options() {
  static const std::vector<TrainerOption> table = make_table();
  return table;
}

const TrainerOption* find_trainer_option(std::string_view name) {
  return find_option(trainer_options(), name);
}

} // namespace hotloop::train
