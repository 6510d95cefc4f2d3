#pragma once
// Human-readable quantities for messages and reports.

#include <cstdint>
#include <string>

namespace hotloop {

// 1536 -> "1.5 KiB", 3 << 30 -> "3.0 GiB"; below 1 KiB, "512 B".
std::string format_bytes(std::uint64_t bytes);

} // namespace hotloop
