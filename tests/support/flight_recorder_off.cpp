// The tests run a job's ranks as threads of one process, each with a process
// group of its own. c10d's flight recorder (on by default: 2000 entries)
// adds a group to a map outside its lock at the group's first collective
// (FlightRecorderDetail.hpp, recordWithResetEnabled), so two groups starting
// at once can corrupt it: a segfault in std::_Rb_tree_insert_and_rebalance
// under ProcessGroupGloo::enqueue, about one run in two of the reducer
// tests. A real job has one group per process. Off here, before main().
#include <cstdlib>

namespace {

const int flight_recorder_off = ::setenv("TORCH_FR_BUFFER_SIZE", "0", 0);

} // namespace
