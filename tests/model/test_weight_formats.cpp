// The byte-level readers: safetensors headers and torch.save() zips, valid
// and malformed. Every malformed file is a DataError that names the file.
#include <gtest/gtest.h>

#include <cstring>

#include "hotloop/errors.h"
#include "hotloop/model/weight_formats/safetensors_format.h"
#include "hotloop/model/weight_formats/torch_zip_format.h"
#include "hotloop/model/weight_formats/zip_archive.h"

namespace hotloop::model {
namespace {

std::vector<std::uint8_t> safetensors_bytes(
    const std::string& json,
    std::size_t data_bytes) {
  std::vector<std::uint8_t> out;
  out.reserve(8 + json.size() + data_bytes);
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<std::uint8_t>(json.size() >> (8 * i)));
  }
  for (const char c : json) {
    out.push_back(static_cast<std::uint8_t>(c));
  }
  out.resize(out.size() + data_bytes, 0);
  return out;
}

std::string safetensors_error(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_safetensors(bytes, "w.safetensors");
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

// A two-tensor archive as hotloop writes it.
std::vector<std::uint8_t> small_zip() {
  static const std::uint8_t a[8] = {0, 0, 128, 63, 0, 0, 0, 64}; // F32 1, 2
  static const std::uint8_t b[8] = {7, 0, 0, 0, 0, 0, 0, 0}; // I64 7
  std::vector<TensorBytes> tensors = {
      {"w", WeightDType::F32, {2}, a}, {"n", WeightDType::I64, {}, b}};
  std::vector<std::uint8_t> zip;
  write_torch_zip(tensors, "model", zip);
  return zip;
}

std::string zip_error(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_torch_zip(bytes, "m.pt");
    return {};
  } catch (const DataError& e) {
    return e.what();
  }
}

} // namespace

TEST(Safetensors, ParsesTensorsMetadataAndAbsoluteOffsets) {
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[],"data_offsets":[24,26]}})";
  const auto bytes = safetensors_bytes(json, 26);
  const SafetensorsFile f = parse_safetensors(bytes, "w");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.tensors[0].name, "a");
  EXPECT_EQ(f.tensors[0].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(f.tensors[0].strides, (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(f.tensors[0].data_offset, 8 + json.size());
  EXPECT_EQ(f.tensors[1].dtype, WeightDType::BF16);
  EXPECT_EQ(f.tensors[1].data_offset, 8 + json.size() + 24);
}

TEST(Safetensors, EveryMalformedHeaderIsADataErrorNamingFileAndTensor) {
  const auto tensor = [](const std::string& entry) {
    return safetensors_bytes(R"({"t":)" + entry + "}", 8);
  };
  EXPECT_NE(
      safetensors_error({1, 2, 3}).find(
          "w.safetensors: not a valid safetensors file"),
      std::string::npos);
  auto huge = safetensors_bytes("{}", 0);
  huge[7] = 0x7f; // header length far beyond the file
  EXPECT_NE(safetensors_error(huge).find("does not fit"), std::string::npos);
  EXPECT_NE(
      safetensors_error(safetensors_bytes("[1,2]", 0))
          .find("not a JSON object"),
      std::string::npos);
  EXPECT_NE(
      safetensors_error(safetensors_bytes("{\"t\":", 0))
          .find("not a JSON object"),
      std::string::npos);
  EXPECT_NE(
      safetensors_error(
          tensor(R"({"dtype":"C64","shape":[1],"data_offsets":[0,8]})"))
          .find("tensor 't': dtype C64 is not supported"),
      std::string::npos);
  EXPECT_NE(
      safetensors_error(
          tensor(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"))
          .find("need 12 bytes but data_offsets give 8"),
      std::string::npos);
  EXPECT_NE(
      safetensors_error(
          tensor(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"))
          .find("outside the 8 data bytes"),
      std::string::npos);
  EXPECT_NE(
      safetensors_error(
          tensor(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,8]})"))
          .find("shape holds something other than a size"),
      std::string::npos);
  EXPECT_NE(
      safetensors_error(
          tensor(
              R"({"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]})"))
          .find("too many"),
      std::string::npos);
  EXPECT_NE(
      safetensors_error(tensor(R"({"dtype":"F32","shape":[2]})"))
          .find("needs dtype, shape and data_offsets"),
      std::string::npos);
}

TEST(Safetensors, HeaderRoundTripsThroughTheParserPaddedToEightBytes) {
  static const std::uint8_t data[6] = {1, 2, 3, 4, 5, 6};
  const std::vector<TensorBytes> tensors = {
      {"x", WeightDType::U8, {2, 3}, data}};
  auto bytes = safetensors_header(tensors, {{"k", "v"}});
  EXPECT_EQ(bytes.size() % 8, 0u);
  bytes.insert(bytes.end(), data, data + 6);
  const auto f = parse_safetensors(bytes, "w");
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(bytes[f.tensors[0].data_offset + 5], 6);
  EXPECT_EQ(f.metadata.at("k"), "v");
}

TEST(TorchZip, ReadsTheArchiveItWrites) {
  const auto zip = small_zip();
  const auto entries = list_zip(zip, "m.pt");
  ASSERT_EQ(entries.size(), 5u); // data.pkl, byteorder, data/0, data/1, version
  EXPECT_EQ(entries[0].name, "model/data.pkl");
  std::size_t storages = 0;
  for (const auto& e : entries) {
    if (e.name.starts_with("model/data/")) {
      ++storages;
      EXPECT_EQ(e.data_offset % 64, 0u)
          << e.name << ": storages are 64-byte aligned";
    }
  }
  EXPECT_GT(storages, 0u) << "no model/data/ entries: nothing was checked";
  const auto records = parse_torch_zip(zip, "m.pt");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].name, "w");
  EXPECT_EQ(records[0].dtype, WeightDType::F32);
  EXPECT_EQ(records[0].shape, (std::vector<std::int64_t>{2}));
  float second = 0;
  std::memcpy(&second, zip.data() + records[0].data_offset + 4, 4);
  EXPECT_EQ(second, 2.0f);
  EXPECT_EQ(records[1].dtype, WeightDType::I64);
  EXPECT_TRUE(records[1].shape.empty());
}

TEST(TorchZip, TruncatedOrCorruptArchivesAreDataErrors) {
  const auto zip = small_zip();
  for (const std::size_t keep : {0ul, 10ul, zip.size() / 2, zip.size() - 1}) {
    const std::vector<std::uint8_t> cut(
        zip.begin(), zip.begin() + static_cast<std::ptrdiff_t>(keep));
    EXPECT_NE(zip_error(cut).find("m.pt"), std::string::npos)
        << "kept " << keep << " bytes";
  }
  // Flip each byte of the pickle in turn: a result or a DataError, never a
  // crash.
  const auto entries = list_zip(zip, "m.pt");
  for (std::uint64_t i = 0; i < entries[0].size; ++i) {
    auto bad = zip;
    bad[entries[0].data_offset + i] ^= 0xff;
    (void)zip_error(bad);
  }
}

TEST(TorchZip, APickleThatNamesAnythingButTensorsIsRefusedByName) {
  auto zip = small_zip();
  const auto entries = list_zip(zip, "m.pt");
  // Rename the OrderedDict global to a same-length one that is not allowed.
  const std::string from = "collections\nOrderedDict\n";
  auto* begin = zip.data() + entries[0].data_offset;
  auto* at =
      std::search(begin, begin + entries[0].size, from.begin(), from.end());
  ASSERT_NE(at, begin + entries[0].size);
  std::memcpy(at, "posix\nsystem\n", 13);
  const std::string error = zip_error(zip);
  EXPECT_NE(error.find("refusing to load"), std::string::npos) << error;
  EXPECT_NE(error.find("posix.system"), std::string::npos) << error;
}

} // namespace hotloop::model
