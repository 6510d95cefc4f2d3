// Writing PyTorch's zip format (torch_zip_format.h): a protocol-2 pickle of
// an OrderedDict of tensors and each storage's bytes, in a stored zip whose
// members are aligned as torch.save aligns them.
#include "hotloop/model/weight_formats/torch_zip_format.h"

#include <cstring>
#include <map>

#include <fmt/format.h>
#include <zlib.h>

#include "hotloop/errors.h"

namespace hotloop::model {

namespace {

const char* storage_class(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::F64:
      return "DoubleStorage";
    case WeightDType::F32:
      return "FloatStorage";
    case WeightDType::F16:
      return "HalfStorage";
    case WeightDType::BF16:
      return "BFloat16Storage";
    case WeightDType::I64:
      return "LongStorage";
    case WeightDType::I32:
      return "IntStorage";
    case WeightDType::I16:
      return "ShortStorage";
    case WeightDType::I8:
      return "CharStorage";
    case WeightDType::U8:
      return "ByteStorage";
    case WeightDType::Bool:
      return "BoolStorage";
  }
  return "FloatStorage";
}

// Byte writers shared by the pickle and the zip below.
void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) {
    out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  }
}

void append_bytes(std::vector<std::uint8_t>& out, const std::string& s) {
  out.insert(out.end(), s.begin(), s.end());
}

// Protocol-2 pickle, the opcodes torch.save itself emits.
class PickleWriter {
 public:
  void op(char c) {
    out_.push_back(static_cast<std::uint8_t>(c));
  }
  void global(const std::string& module, const std::string& name) {
    op('c');
    append(module + "\n" + name + "\n");
  }
  void str(const std::string& s) {
    op('X');
    le(s.size(), 4);
    append(s);
  }
  void integer(std::int64_t v) {
    op('\x8a'); // LONG1, 8 bytes two's complement
    out_.push_back(8);
    le(static_cast<std::uint64_t>(v), 8);
  }
  std::vector<std::uint8_t>& bytes() {
    return out_;
  }

 private:
  void append(const std::string& s) {
    append_bytes(out_, s);
  }
  void le(std::uint64_t v, int n) {
    put_le(out_, v, n);
  }
  std::vector<std::uint8_t> out_;
};

// A stored (uncompressed) zip with each member's data aligned to 64 bytes, as
// PyTorch writes it so that storages can be memory-mapped.
class ZipWriter {
 public:
  explicit ZipWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void add(const std::string& name, std::span<const std::uint8_t> data) {
    if (data.size() > 0xFFFFFFFEu || out_.size() > 0xFFFFFFFEu - data.size()) {
      throw DataError(
          "torch zip: files over 4 GiB are not supported; write .safetensors instead");
    }
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, data.data(), static_cast<uInt>(data.size())));
    const auto local = static_cast<std::uint32_t>(out_.size());
    const std::size_t unpadded = out_.size() + 30 + name.size() + 4;
    const auto pad = static_cast<std::uint16_t>((64 - unpadded % 64) % 64);
    header(
        0x04034b50,
        crc,
        data.size(),
        name,
        static_cast<std::uint16_t>(4 + pad));
    le(0xFB46, 2); // extra field: padding, as PyTorch's writer names it
    le(pad, 2);
    out_.insert(out_.end(), pad, 0);
    out_.insert(out_.end(), data.begin(), data.end());
    central_.push_back(
        {name, crc, static_cast<std::uint32_t>(data.size()), local});
  }
  void finish() {
    const auto dir = static_cast<std::uint32_t>(out_.size());
    for (const auto& c : central_) {
      le(0x02014b50, 4);
      le(20, 2); // version made by
      common(c.crc, c.size, c.name, 0);
      le(0, 2); // comment length
      le(0, 2); // disk
      le(0, 2); // internal attributes
      le(0, 4); // external attributes
      le(c.local, 4);
      append(c.name);
    }
    const auto dir_size = static_cast<std::uint32_t>(out_.size() - dir);
    le(0x06054b50, 4);
    le(0, 4);
    le(central_.size(), 2);
    le(central_.size(), 2);
    le(dir_size, 4);
    le(dir, 4);
    le(0, 2);
  }

 private:
  struct Central {
    std::string name;
    std::uint32_t crc;
    std::uint32_t size;
    std::uint32_t local;
  };
  void header(
      std::uint32_t sig,
      std::uint32_t crc,
      std::uint64_t size,
      const std::string& name,
      std::uint16_t extra) {
    le(sig, 4);
    common(crc, size, name, extra);
    append(name);
  }
  // From "version needed" to the extra length: shared by both headers.
  void common(
      std::uint32_t crc,
      std::uint64_t size,
      const std::string& name,
      std::uint16_t extra) {
    le(20, 2); // version needed
    le(0, 2); // flags
    le(0, 2); // stored
    le(0, 2); // time
    le(0x21, 2); // date: 1980-01-01
    le(crc, 4);
    le(size, 4);
    le(size, 4);
    le(name.size(), 2);
    le(extra, 2);
  }
  void append(const std::string& s) {
    append_bytes(out_, s);
  }
  void le(std::uint64_t v, int n) {
    put_le(out_, v, n);
  }
  std::vector<std::uint8_t>& out_;
  std::vector<Central> central_;
};

std::span<const std::uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

} // namespace

void write_torch_zip(
    const std::vector<TensorBytes>& tensors,
    const std::string& archive_name,
    std::vector<std::uint8_t>& out) {
  PickleWriter p;
  p.op('\x80');
  p.bytes().push_back(2); // PROTO 2
  p.global("collections", "OrderedDict");
  p.op(')');
  p.op('R');
  p.op('(');
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const auto& t = tensors[k];
    std::int64_t numel = 1;
    for (const auto d : t.shape) {
      numel *= d;
    }
    p.str(t.name);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.op('(');
    p.op('(');
    p.str("storage");
    p.global("torch", storage_class(t.dtype));
    p.str(std::to_string(k));
    p.str("cpu");
    p.integer(numel);
    p.op('t');
    p.op('Q');
    p.integer(0);
    p.op('(');
    for (const auto d : t.shape) {
      p.integer(d);
    }
    p.op('t');
    p.op('(');
    for (const auto s : contiguous_strides(t.shape)) {
      p.integer(s);
    }
    p.op('t');
    p.op('\x89'); // requires_grad=False
    p.global("collections", "OrderedDict");
    p.op(')');
    p.op('R');
    p.op('t');
    p.op('R');
  }
  p.op('u');
  p.op('.');

  out.clear();
  ZipWriter zip(out);
  zip.add(archive_name + "/data.pkl", p.bytes());
  zip.add(archive_name + "/byteorder", as_bytes("little"));
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    zip.add(fmt::format("{}/data/{}", archive_name, k), tensors[k].data);
  }
  zip.add(archive_name + "/version", as_bytes("3\n"));
  zip.finish();
}

} // namespace hotloop::model
