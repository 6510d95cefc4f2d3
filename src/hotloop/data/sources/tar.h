#pragma once
// POSIX tar, as WebDataset shards use it: reading the member list (ustar, pax
// and GNU long-name headers, as Python's tarfile writes them) and writing ustar
// archives. Members are found by reading only their 512-byte headers; their
// data is read later by offset.

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace hotloop::data {

struct TarMember {
  std::string name; // path inside the archive
  std::uint64_t offset = 0; // of the data, from the start of the archive
  std::uint64_t size = 0;
};

// Regular-file members of the archive in `bytes`, in order. `name` goes into
// errors. Throws DataError for a bad checksum, a bad size field, or data that
// runs past the end (a truncated shard).
std::vector<TarMember> list_tar(
    std::span<const std::uint8_t> bytes,
    const std::string& name);

// The same for a file, reading headers only. Throws DataError naming the file.
std::vector<TarMember> list_tar_file(const std::string& path);

// Writes a ustar archive. Not thread-safe; one writer per shard.
class TarWriter {
 public:
  explicit TarWriter(const std::string& path); // throws DataError when the file
                                               // cannot be created
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  // Adds a regular file. Names longer than ustar's 100 bytes are split into its
  // 155-byte prefix.
  void add(const std::string& name, std::span<const std::uint8_t> data);
  // Writes the end-of-archive blocks and closes; throws DataError if the disk
  // write fails.
  void close();
  std::uint64_t bytes_written() const {
    return written_;
  }

 private:
  void write(const void* data, std::size_t size);
  std::string path_;
  std::FILE* file_ = nullptr;
  std::uint64_t written_ = 0;
};

} // namespace hotloop::data
