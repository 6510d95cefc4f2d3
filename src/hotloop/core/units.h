#pragma once
// Human-readable quantities for messages and reports.

#include <cstdint>
#include <string>

namespace hotloop {

// 1536 -> "1.5 KiB", 3 << 30 -> "3.0 GiB"; below 1 KiB, "512 B".
std::string format_bytes(std::uint64_t bytes);

} // namespace hotloop

namespace hotloop {

// "256MiB", "1GB", "64k", "1000" -> bytes (binary and decimal units,
// case-insensitive). Throws UsageError for anything else, naming `what` (the
// flag).
std::uint64_t parse_bytes(const std::string& text, const std::string& what);

} // namespace hotloop
