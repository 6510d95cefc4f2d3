#include "cli_common.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace hotloop::cli {

bool stdout_wants_color() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr &&
      (term == nullptr || std::strcmp(term, "dumb") != 0);
}

} // namespace hotloop::cli
