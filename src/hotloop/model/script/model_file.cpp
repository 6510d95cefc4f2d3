// sniff_model_file(): what a --model torchscript:FILE really is, from its
// bytes: a TorchScript zip (code/ + data.pkl; traced ones also keep their
// example inputs, traced_inputs.pkl), a torch.export package (archive_format),
// a torch.save() zip of tensors, safetensors, or something else.

#include <fmt/format.h>

#include "hotloop/data/file_io.h"
#include "hotloop/errors.h"
#include "hotloop/model/script/exported.h"
#include "hotloop/model/weight_formats/zip_archive.h"

namespace hotloop::model {

namespace {

bool has_member(const std::vector<ZipEntry>& entries, const std::string& tail) {
  for (const ZipEntry& e : entries) {
    // Members sit in one top folder named after the archive: "m/code/...".
    const auto slash = e.name.find('/');
    if (slash != std::string::npos &&
        e.name.compare(slash + 1, tail.size(), tail) == 0) {
      return true;
    }
  }
  return false;
}

bool looks_like_safetensors(const std::vector<std::uint8_t>& b) {
  if (b.size() < 10) {
    return false;
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | b[static_cast<std::size_t>(i)];
  }
  return n > 0 && n <= b.size() - 8 && b[8] == '{';
}

} // namespace

std::string exported_path(const std::string& model_name) {
  std::string path = model_name.substr(std::string(kTorchScriptPrefix).size());
  if (path.empty()) {
    throw UsageError(
        "--model torchscript: names no file",
        "give the exported module's path: --model torchscript:model.pt");
  }
  return path;
}

ModelFileFormat sniff_model_file(const std::string& path) {
  const std::vector<std::uint8_t> bytes = data::read_file(path);
  ModelFileFormat f;
  if (looks_like_safetensors(bytes)) {
    f.kind = ModelFileKind::Safetensors;
    f.description = "a safetensors weight file (weights without the code)";
    return f;
  }
  const bool zip = bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K' &&
      bytes[2] == 3 && bytes[3] == 4;
  if (!zip) {
    f.description = fmt::format(
        "not a zip archive ({} bytes{})",
        bytes.size(),
        bytes.empty() ? "" : ", first bytes are not 'PK'");
    return f;
  }
  std::vector<ZipEntry> entries;
  try {
    entries = list_zip(bytes, path);
  } catch (const DataError& e) {
    f.description = fmt::format("a damaged zip archive ({})", e.what());
    return f;
  }
  if (has_member(entries, "archive_format") || has_member(entries, "models/")) {
    f.kind = ModelFileKind::TorchExport;
    f.description =
        "a torch.export / AOTInductor package (LibTorch 2.11 runs these forward only)";
  } else if (has_member(entries, "code/") && has_member(entries, "data.pkl")) {
    f.kind = ModelFileKind::TorchScript;
    f.traced = has_member(entries, "traced_inputs.pkl");
    f.description =
        f.traced ? "TorchScript (traced)" : "TorchScript (scripted)";
  } else if (has_member(entries, "data.pkl")) {
    f.kind = ModelFileKind::StateDict;
    f.description =
        "a torch.save() zip (weights or a state_dict, without the model's code)";
  } else {
    f.description = fmt::format(
        "a zip archive of {} member(s) that is not a PyTorch file",
        entries.size());
  }
  return f;
}

} // namespace hotloop::model
