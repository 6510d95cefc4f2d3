#include "hotloop/core/cpus.h"

#include <sched.h>
#include <unistd.h>

namespace hotloop {

unsigned int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    return static_cast<unsigned int>(CPU_COUNT(&set));
  }
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned int>(n) : 1;
}

} // namespace hotloop
