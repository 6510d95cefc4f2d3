#include "cli_common.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace hotloop::cli {

data::Resident parse_resident(const std::string& value) {
  return pick<data::Resident>(
      "resident",
      value,
      {{"auto", data::Resident::Auto},
       {"on", data::Resident::On},
       {"off", data::Resident::Off}});
}

data::Augment parse_augment(const std::string& value) {
  return pick<data::Augment>(
      "augment",
      value,
      {{"default", data::Augment::Default}, {"none", data::Augment::None}});
}

bool parse_augment_device(const std::string& value) {
  return pick<bool>("augment-device", value, {{"cpu", false}, {"gpu", true}});
}

bool stdout_wants_color() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr &&
      (term == nullptr || std::strcmp(term, "dumb") != 0);
}

} // namespace hotloop::cli
