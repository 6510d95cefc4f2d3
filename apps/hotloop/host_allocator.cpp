#include "host_allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace hotloop::cli {

void configure_host_allocator() {
  const char* choice = std::getenv("HOTLOOP_HOST_ALLOCATOR");
  if (choice != nullptr && std::string_view(choice) == "default") {
    return;
  }
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

} // namespace hotloop::cli
