// The model-family registry (model/family.h): every name belongs to one
// family, the kinds, the help and the Hugging Face architectures are the
// entries', and each named language-model size resolves to its shape.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include "hotloop/errors.h"
#include "hotloop/model/family.h"
#include "hotloop/model/gpt/gpt.h"
#include "hotloop/model/llama/llama.h"
#include "hotloop/model/lm/hf_checkpoint.h"
#include "hotloop/model/lm/language_model.h"
#include "hotloop/model/model.h"
#include "support/temp_dir.h"
#include "test_paths.h"

namespace hotloop::model {
namespace {

TEST(ModelFamilies, EveryNamedSizeHasOneFamilyAndItsKindSaysSo) {
  std::set<std::string> seen;
  std::size_t sizes = 0;
  for (const ModelFamilyEntry& f : model_families()) {
    EXPECT_EQ(&family_entry(f.family), &f) << f.title;
    EXPECT_FALSE(f.title.empty());
    EXPECT_FALSE(f.about.empty()) << f.title;
    EXPECT_FALSE(f.checkpointing.empty()) << f.title;
    // A family names sizes or a prefixed form, not both, not neither.
    EXPECT_NE(f.sizes.empty(), f.prefix.empty()) << f.title;
    for (const NamedModel& size : f.sizes) {
      EXPECT_TRUE(seen.insert(size.name).second) << size.name << " twice";
      EXPECT_EQ(model_kind(size.name).family, f.family) << size.name;
      EXPECT_EQ(find_named_model(size.name).family, &f) << size.name;
      EXPECT_FALSE(size.shape.empty()) << size.name;
      EXPECT_GT(size.recipe.lr, 0) << size.name;
      ++sizes;
    }
    if (!f.prefix.empty()) {
      const ModelKind kind = model_kind(f.prefix + "some/path");
      EXPECT_EQ(kind.family, f.family) << f.form;
      EXPECT_EQ(kind.path, "some/path") << f.form;
      EXPECT_TRUE(f.form.starts_with(f.prefix)) << f.form;
    }
  }
  EXPECT_EQ(model_names().size(), sizes); // model_names() is the entries'
  EXPECT_EQ(find_named_model("resnet19").size, nullptr);
  EXPECT_EQ(model_kind("resnet19").family, ModelFamily::Unknown);
  EXPECT_THROW(family_entry(ModelFamily::Unknown), std::out_of_range);
}

TEST(ModelFamilies, TheModelHelpListsEverySizeAndForm) {
  const std::string help = model_help();
  const std::string sizes = model_sizes_help();
  for (const ModelFamilyEntry& f : model_families()) {
    for (const NamedModel& size : f.sizes) {
      EXPECT_NE(help.find(size.name), std::string::npos) << size.name;
      EXPECT_NE(sizes.find(size.name), std::string::npos) << size.name;
      EXPECT_NE(sizes.find(size.shape), std::string::npos) << size.name;
    }
    if (!f.form.empty()) {
      EXPECT_NE(help.find(f.form), std::string::npos) << f.form;
    }
    for (const HfArchitecture& a : f.hf_architectures) {
      EXPECT_NE(help.find(a.name), std::string::npos) << a.name;
    }
  }
}

// The reference pages name what the entries hold: a size added to an entry
// and not to docs/models.md (image models, exports) or
// docs/language-models.md (GPT, Llama, Hugging Face folders) fails here.
TEST(ModelFamilies, TheDocsNameEverySizeFormAndArchitecture) {
  std::string docs;
  for (const char* page : {"models.md", "language-models.md"}) {
    std::ifstream in(std::string(HOTLOOP_TEST_SOURCE_DIR) + "/../docs/" + page);
    ASSERT_TRUE(in) << page;
    docs.append(std::istreambuf_iterator<char>(in), {});
  }
  for (const ModelFamilyEntry& f : model_families()) {
    for (const NamedModel& size : f.sizes) {
      EXPECT_NE(docs.find("`" + size.name + "`"), std::string::npos)
          << "the docs do not name `" << size.name << "`";
    }
    if (!f.form.empty()) {
      EXPECT_NE(docs.find(f.form), std::string::npos) << f.form;
    }
    for (const HfArchitecture& a : f.hf_architectures) {
      EXPECT_NE(docs.find(a.name), std::string::npos) << a.name;
    }
  }
}

TEST(ModelFamilies, EachLanguageModelSizeResolvesToTheShapeItsEntryShows) {
  for (const ModelFamily family : {ModelFamily::Gpt, ModelFamily::Llama}) {
    for (const NamedModel& size : family_entry(family).sizes) {
      const ModelOptions o =
          resolve_language_model(ModelOptions().set_name(size.name));
      EXPECT_TRUE(size.shape.starts_with(fmt::format("{} layers", o.lm.layers)))
          << size.name << ": " << size.shape;
      EXPECT_NE(
          size.shape.find(fmt::format("width {}", o.lm.width)),
          std::string::npos)
          << size.name << ": " << size.shape;
      EXPECT_NE(
          size.shape.find(fmt::format("context {}", o.lm.context)),
          std::string::npos)
          << size.name << ": " << size.shape;
    }
  }
}

// make_model() hands a name to its family's entry, which builds it.
TEST(ModelFamilies, EachFamilyBuildsItsOwnModels) {
  for (const ModelFamilyEntry& f : model_families()) {
    EXPECT_TRUE(static_cast<bool>(f.make)) << f.title;
  }
  const auto image = make_model(
      ModelOptions().set_name("mlp").set_in_channels(1).set_image_size(8));
  EXPECT_EQ(image->head_name(), "fc");
  EXPECT_NE(
      std::dynamic_pointer_cast<Gpt>(
          make_model(ModelOptions().set_name("gpt-nano"))),
      nullptr);
  EXPECT_NE(
      std::dynamic_pointer_cast<Llama>(
          make_model(ModelOptions().set_name("llama-nano"))),
      nullptr);
  EXPECT_THROW(make_language_model(ModelOptions().set_name("mlp")), UsageError);
}

// Each architecture a family names is read back into that family, from
// "architectures" or from "model_type" alone.
TEST(ModelFamilies, EachHuggingFaceArchitectureIsReadByItsFamily) {
  const test::TempDir dir;
  for (const ModelFamilyEntry& f : model_families()) {
    for (const HfArchitecture& a : f.hf_architectures) {
      for (const bool named : {true, false}) {
        const std::string config = named
            ? fmt::format(
                  R"({{"architectures": ["{}"], "model_type": "{}"}})",
                  a.name,
                  a.model_type)
            : fmt::format(R"({{"model_type": "{}"}})", a.model_type);
        // A small, valid shape in both families' field names.
        const std::string shape =
            R"(, "n_layer": 2, "n_head": 2, "n_embd": 64, "n_positions": 64, "vocab_size": 100, "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 64, "intermediate_size": 128, "max_position_embeddings": 64})";
        dir.write("m/config.json", config.substr(0, config.size() - 1) + shape);
        const HfModelConfig c = read_hf_config((dir.path() / "m").string());
        EXPECT_EQ(c.architecture, a.name) << a.model_type << named;
        EXPECT_EQ(c.family(), f.family) << a.name;
        EXPECT_EQ(c.context, 64) << a.name;
      }
    }
  }
  dir.write("m/config.json", R"({"architectures": ["BertModel"]})");
  try {
    read_hf_config((dir.path() / "m").string());
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("BertModel"), std::string::npos);
    EXPECT_NE(e.hint().find("Qwen2ForCausalLM"), std::string::npos);
  }
  EXPECT_EQ(family_of_hf_architecture("BertModel"), nullptr);
}

// The written config.json names the architecture its family reads back.
TEST(ModelFamilies, AWrittenLlamaConfigNamesTheArchitectureOfItsFamily) {
  const test::TempDir dir;
  for (const LlamaFamily family :
       {LlamaFamily::Llama, LlamaFamily::Qwen2, LlamaFamily::Mistral}) {
    LlamaConfig c;
    c.family = family;
    dir.write("m/config.json", hf_llama_config(c));
    const HfModelConfig back = read_hf_config((dir.path() / "m").string());
    EXPECT_EQ(back.as<LlamaConfig>().family, family) << back.architecture;
    EXPECT_EQ(
        family_of_hf_architecture(back.architecture)->family,
        ModelFamily::Llama);
  }
}

// A family that reads Hugging Face folders also builds and writes them, and
// a language-model family resolves its sizes' shapes; the rest leave both
// empty (resolve_language_model refuses them).
// A folder's config is its family's own type; asking for another family's
// is an error, not a cast.
TEST(ModelFamilies, AFoldersConfigIsOnlyItsOwnFamilysType) {
  GptConfig gpt;
  gpt.context = 64;
  const HfModelConfig c{"GPT2LMHeadModel", gpt.context, gpt};
  EXPECT_EQ(c.as<GptConfig>().context, 64);
  EXPECT_EQ(c.family(), ModelFamily::Gpt);
  EXPECT_THROW((void)c.as<LlamaConfig>(), Error);
}

TEST(ModelFamilies, AFamilyThatReadsAFolderAlsoBuildsAndWritesIt) {
  for (const ModelFamilyEntry& f : model_families()) {
    const bool reads = !f.hf_architectures.empty();
    EXPECT_EQ(static_cast<bool>(f.hf.read), reads) << f.title;
    EXPECT_EQ(static_cast<bool>(f.hf.make), reads) << f.title;
    EXPECT_EQ(static_cast<bool>(f.hf.write), reads) << f.title;
    const bool lm = ModelKind{f.family, ""}.language_model();
    EXPECT_EQ(static_cast<bool>(f.resolve), lm) << f.title;
  }
  EXPECT_THROW(
      resolve_language_model(ModelOptions().set_name("mlp")), UsageError);
}

// write_hf_folder asks each family's adapter: a GPT and a Llama written into
// a folder read back as their own family, shape and all, and build again.
TEST(ModelFamilies, EachFamilysModelIsWrittenByItsOwnAdapter) {
  const test::TempDir dir;
  for (const char* name : {"gpt-nano", "llama-nano"}) {
    const ModelOptions o = ModelOptions().set_name(name);
    const auto lm = make_language_model(o);
    const std::string folder = (dir.path() / name).string();
    write_hf_folder(folder, *lm);
    const HfModelConfig back = read_hf_config(folder);
    EXPECT_EQ(back.family(), model_kind(name).family) << name;
    EXPECT_EQ(back.context, lm->context()) << name;
    const ModelOptions again = ModelOptions().set_name("hf:" + folder);
    EXPECT_EQ(make_language_model(again)->vocab(), lm->vocab()) << name;
  }
}

} // namespace
} // namespace hotloop::model
