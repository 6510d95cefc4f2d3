#pragma once
// The first line of an exception's message: c10::Error appends a C++
// backtrace after it, which does not belong in a user-facing error.

#include <string>

namespace hotloop {

inline std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

} // namespace hotloop
