#pragma once
// glibc's allocator, set for training at the start of the process: a training
// step frees hundreds of MB of activations and allocates them again in the
// next step. By default glibc returns the freed top of the heap to the OS
// once it passes the trim threshold (and maps buffers above the mmap
// threshold afresh), so every step page-faults and zeroes that memory again.
// Here the trim threshold is 1 GiB and the mmap threshold a fixed 32 MiB:
// freed activations stay in the process for the next step (RSS holds them,
// as the CUDA caching allocator holds device memory).
// HOTLOOP_HOST_ALLOCATOR=default leaves glibc as it is.

namespace hotloop::cli {

void configure_host_allocator();

} // namespace hotloop::cli
