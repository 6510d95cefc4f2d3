// Exported models without Python: what a --model torchscript:FILE really is,
// told by its bytes, and the errors for files that are not TorchScript. The
// TorchScript modules themselves are exported by Python and tested against
// PyTorch in tests/model/torchscript.py (ctest model.torchscript).

#include <gtest/gtest.h>

#include <ATen/ops/ones.h>

#include <fstream>

#include "hotloop/errors.h"
#include "hotloop/model/model.h"
#include "hotloop/model/script/exported.h"
#include "hotloop/model/weights.h"
#include "support/temp_dir.h"

namespace hotloop::model {
namespace {

TEST(ExportedModel, TheFileKindIsToldByItsBytesNotItsName) {
  test::TempDir dir;
  const std::string st = (dir.path() / "model.pt").string(); // safetensors
  write_weights(st + ".safetensors", {{"w", at::ones({2})}});
  std::filesystem::rename(st + ".safetensors", st);
  EXPECT_EQ(sniff_model_file(st).kind, ModelFileKind::Safetensors);

  const std::string zip = (dir.path() / "weights.pt").string();
  write_weights(zip, {{"w", at::ones({2})}}); // torch.save() zip
  const ModelFileFormat z = sniff_model_file(zip);
  EXPECT_EQ(z.kind, ModelFileKind::StateDict);
  EXPECT_NE(z.description.find("torch.save() zip"), std::string::npos);

  const std::string junk = (dir.path() / "junk.pt").string();
  std::ofstream(junk) << "not a model at all";
  const ModelFileFormat j = sniff_model_file(junk);
  EXPECT_EQ(j.kind, ModelFileKind::Other);
  EXPECT_NE(j.description.find("not a zip archive"), std::string::npos);

  EXPECT_THROW(
      sniff_model_file((dir.path() / "missing.pt").string()), DataError);
}

TEST(ExportedModel, LoadingAWeightFileSaysWhatItIsAndHowToExport) {
  test::TempDir dir;
  const std::string zip = (dir.path() / "weights.pt").string();
  write_weights(zip, {{"w", at::ones({2})}});
  ExportedOptions o;
  o.path = zip;
  try {
    load_exported_model(o);
    ADD_FAILURE() << "a state_dict zip must not load as a model";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("not a TorchScript module"),
        std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("torch.jit.script"), std::string::npos);
  }
}

TEST(ExportedModel, ModelNamesAndOptions) {
  EXPECT_EQ(exported_path("torchscript:dir/m.pt"), "dir/m.pt");
  EXPECT_THROW(exported_path("torchscript:"), UsageError);
  ModelOptions o;
  o.name = "torchscript:";
  EXPECT_THROW(o.validate(), UsageError);
  o.name = "resnet18";
  o.exported.head = "fc";
  EXPECT_THROW(o.validate(), UsageError); // --head is for exported models
}

} // namespace
} // namespace hotloop::model
