#pragma once
// What tensors hold in host memory when training runs on the CPU, counted
// as the CUDA caching allocator counts device memory: the bytes allocated
// now and their peak. A counting allocator wraps LibTorch's CPU allocator
// once, for the rest of the process, where asked: `hotloop plan` (its
// activation trials on the CPU) and a run with HOTLOOP_COUNT_HOST_MEMORY=1
// (its summary's peak then is the host's). Only tensors allocated after it
// is installed are counted.

#include <cstdint>

namespace hotloop::train {

struct HostMemoryStats {
  std::uint64_t allocated = 0;
  std::uint64_t peak_allocated = 0;
};

// Installs the counter (once; later calls do nothing).
void count_host_memory();
// Whether it is installed (count_host_memory, or the environment variable
// read by count_host_memory_if_asked).
bool host_memory_counted();
// Installs it when HOTLOOP_COUNT_HOST_MEMORY=1.
void count_host_memory_if_asked();
// The counts so far (zeros when not counted).
HostMemoryStats host_memory_stats();
// The peak becomes what is allocated now.
void reset_host_memory_peak();

} // namespace hotloop::train
