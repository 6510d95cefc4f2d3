#pragma once
// TensorBoard event files, written without TensorFlow or Python: TFRecord
// framing (length, masked CRC-32C of the length, the bytes, masked CRC-32C of
// the bytes) around hand-encoded `Event` protobuf messages holding scalar
// summaries. `tensorboard --logdir RUN` reads them.

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hotloop::telemetry {

// CRC-32C (Castagnoli), as TFRecord uses it.
std::uint32_t crc32c(std::string_view bytes);
// TFRecord's masked form of a CRC.
std::uint32_t masked_crc32c(std::string_view bytes);

class TensorBoardWriter {
 public:
  // Creates `dir`/events.out.tfevents.<unix time>.<host> and writes the
  // file-version event. Throws DataError when the file cannot be created.
  explicit TensorBoardWriter(const std::string& dir);
  // One event at `step` with a scalar per (tag, value).
  void scalars(
      std::int64_t step,
      const std::vector<std::pair<std::string, double>>& values);
  void flush();
  const std::string& path() const {
    return path_;
  }

 private:
  void record(const std::string& event);
  std::string path_;
  std::ofstream out_;
};

} // namespace hotloop::telemetry
