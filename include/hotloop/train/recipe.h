#pragma once
// Recipes: what each built-in model trains with when the user does not say,
// chosen so that the defaults give a good result on their own (fastai's
// fit_one_cycle is the model). A recipe sets only the options the user left
// unset (on the command line or in a --config file); `hotloop train` prints
// which values came from it, and config.json records each value's source.
//
//   mlp, cnn-small  AdamW at 3e-3 (mlp: 1e-3), one-cycle (a warm-up over the
//                   first 30% of the steps), no augmentation (on
//                   Fashion-MNIST-sized images crop+flip costs 3.6 points
//                   after 3 epochs; docs/training.md has the measurements)
//   resnet*         SGD with Nesterov momentum 0.9 at lr 0.1 x batch / 128
//                   (the linear scaling rule, Goyal et al. 2017), one-cycle,
//                   weight decay 5e-4, label smoothing 0.1
//   gpt-*           AdamW at 1e-2 (gpt-mini 1e-3, gpt2 6e-4, gpt2-medium
//                   3e-4), beta2 0.95, weight decay 0.1 on matrices, 50
//                   warm-up steps (gpt2*: 700) then cosine to lr / 10,
//                   gradient norm clipped at 1 (nanoGPT's and llm.c's GPT-2
//                   settings); the small sizes 3 epochs. Every language
//                   model (the Llama family too) trains in bf16 on a GPU
//                   that has it (compute capability 8.0 and up), as every
//                   LLM trainer defaults to; fp32 on the CPU and older GPUs
// Each named size's rate, length and optimizer family (the `lr`, `small` and
// `sgd` of model/family.h's SizeRecipe) are in its family's entry, beside
// its shape; this file turns them into flag values.
// A user who picks the other optimizer gets that optimizer's values (SGD:
// momentum, Nesterov, lr 0.1 x batch / 128, weight decay 5e-4; AdamW: lr
// 3e-3 for cnn-small, 1e-3 otherwise), never a mix. A model hotloop does not
// know (a user's own) has no recipe.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hotloop/train/options.h"

namespace hotloop::train {

struct RecipeValue {
  std::string key; // the flag's name: "lr", "optimizer", ...
  std::string value; // as it would be written on the command line
};

struct Recipe {
  std::string model;
  std::vector<RecipeValue> values; // empty: no recipe
};

// What a recipe depends on.
struct RecipeFor {
  std::string model;
  std::int64_t batch = 64; // the global batch
  std::optional<OptimizerKind> optimizer = std::nullopt; // the user's choice
  // Starting from pretrained weights (--init): a language model gets the
  // fine-tuning recipe; with `lora` (--lora-rank), LoRA's: the adapters
  // take a ten times higher rate.
  bool pretrained = false;
  bool lora = false;
  // The mixed precision of the CUDA device the run trains on
  // (mixed_precision_for: bf16 from compute capability 8.0); nullopt on the
  // CPU.
  std::optional<Precision> gpu_precision = std::nullopt;
};

Recipe recipe_for(const RecipeFor& what);

// Every named size's recipe (model/family.h's entries) as the flags it
// sets at global batch `batch`, sizes with the same values on one line:
// `train --help`'s footer.
std::string recipes_help(std::int64_t batch = 128);

// The CUDA device `device` (auto | cpu | cuda[:N]) means here, as the
// trainer resolves it, and its mixed precision; nullopt for the CPU and
// wherever LibTorch cannot use CUDA (never throws for that: the trainer
// does).
std::optional<Precision> gpu_mixed_precision(const std::string& device);

// Sets each of the recipe's values in `o` whose key is not in `given` (the
// options the user set); returns the keys it set.
std::vector<std::string> apply_recipe(
    const Recipe& recipe,
    TrainerOptions& o,
    const std::set<std::string>& given = {});

} // namespace hotloop::train
