#pragma once
// Writing a file so that readers see the old file or the whole new one, never
// half of it: a temporary file in the same folder, fsync, rename, fsync of the
// folder. Weight files and checkpoints use it.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace hotloop {

// Writes the concatenation of `parts` to `path` atomically. Throws DataError
// naming the path when the folder is not writable or the disk is full; the old
// file, if any, is then untouched and no temporary file is left.
// `before_commit` (may be empty) runs once the temporary file is complete and
// synced, just before the rename: a test's hook to stop or fail a write there.
void write_file_atomic(
    const std::string& path,
    const std::vector<std::span<const std::uint8_t>>& parts,
    const std::function<void()>& before_commit = {});
// The same for one text (a report, a JSON file).
void write_text_atomic(const std::string& path, const std::string& text);

} // namespace hotloop
