#pragma once
// How many CPUs this process may run on (affinity masks and cgroup cpusets
// included).

namespace hotloop {

unsigned int usable_cpus();

} // namespace hotloop
