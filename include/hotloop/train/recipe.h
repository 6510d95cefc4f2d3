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
//                   settings); the small sizes 3 epochs
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

// The recipe for `model` at a global batch of `batch`, with `optimizer`
// when the user chose one. A language model starting from `pretrained`
// weights (--init) gets the fine-tuning recipe; with `lora` (--lora-rank),
// LoRA's: the adapters take a ten times higher rate.
Recipe recipe_for(
    const std::string& model,
    std::int64_t batch,
    std::optional<OptimizerKind> optimizer = std::nullopt,
    bool pretrained = false,
    bool lora = false);

// Sets each of the recipe's values in `o` whose key is not in `given` (the
// options the user set); returns the keys it set.
std::vector<std::string> apply_recipe(
    const Recipe& recipe,
    TrainerOptions& o,
    const std::set<std::string>& given = {});

} // namespace hotloop::train
