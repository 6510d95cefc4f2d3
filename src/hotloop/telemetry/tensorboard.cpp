#include "hotloop/telemetry/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "hotloop/errors.h"

namespace hotloop::telemetry {

namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) {
      c = (c & 1) != 0 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    }
    table[i] = c;
  }
  return table;
}

constexpr auto kCrc32cTable = make_crc32c_table();

// Protocol-buffer wire encoding, just what Event and Summary need.
void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void key(std::string& out, int field, int wire_type) {
  varint(out, static_cast<std::uint64_t>(field << 3 | wire_type));
}

template <typename T>
void fixed(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T)); // little-endian hosts only (x86, arm)
  out.append(bytes, sizeof(T));
}

void bytes_field(std::string& out, int field, std::string_view bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out.append(bytes);
}

double unix_now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3;
//         Summary summary = 5; }
std::string event(std::int64_t step) {
  std::string e;
  key(e, 1, 1);
  fixed(e, unix_now());
  key(e, 2, 0);
  varint(e, static_cast<std::uint64_t>(step));
  return e;
}

} // namespace

std::uint32_t crc32c(std::string_view bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) {
    c = kCrc32cTable[(c ^ static_cast<unsigned char>(ch)) & 0xFF] ^ (c >> 8);
  }
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  path_ = (std::filesystem::path(dir) /
           fmt::format(
               "events.out.tfevents.{}.{}",
               static_cast<long long>(unix_now()),
               host))
              .string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    throw DataError(fmt::format("cannot create {}", path_));
  }
  std::string e = event(0);
  bytes_field(e, 3, "brain.Event:2");
  record(e);
  flush();
}

void TensorBoardWriter::scalars(
    std::int64_t step,
    const std::vector<std::pair<std::string, double>>& values) {
  // Summary { repeated Value value = 1; }
  // Value { string tag = 1; float simple_value = 2; }
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    bytes_field(value, 1, tag);
    key(value, 2, 5);
    fixed(value, static_cast<float>(v));
    bytes_field(summary, 1, value);
  }
  std::string e = event(step);
  bytes_field(e, 5, summary);
  record(e);
}

void TensorBoardWriter::record(const std::string& data) {
  std::string header;
  fixed(header, static_cast<std::uint64_t>(data.size()));
  std::string framed = header;
  fixed(framed, masked_crc32c(header));
  framed += data;
  fixed(framed, masked_crc32c(data));
  out_.write(framed.data(), static_cast<std::streamsize>(framed.size()));
}

void TensorBoardWriter::flush() {
  out_.flush();
}

} // namespace hotloop::telemetry
