#pragma once
// Faults on demand, for tests that cannot wait for real hardware to fail: set
// in the environment, read once when a Trainer is made.
//   HOTLOOP_INJECT_OOM_ABOVE=N       a training step whose micro-batch holds
//                                    more than N samples throws the real
//                                    c10::OutOfMemoryError after its backward
//                                    (the memory peak);
//   HOTLOOP_INJECT_OOM_RANK=R        ... only on rank R of a data-parallel job;
//   HOTLOOP_INJECT_OOM_UNIT=forward:U|backward:U
//                                    ... at ZeRO stage 3, inside unit U's
//                                    forward or backward instead (once its
//                                    parameters are gathered and the next
//                                    unit's gather started; in training
//                                    forwards only; a run without units
//                                    refuses it);
//   HOTLOOP_INJECT_OOM_WHOLE=1       at the end of a ZeRO stage-3 run the
//                                    whole model's buffers throw the real
//                                    c10::OutOfMemoryError once allocated (it
//                                    does not fit one device whole; with
//                                    HOTLOOP_INJECT_OOM_RANK only on rank R);
//   HOTLOOP_INJECT_OVERFLOW_STEPS=N[,M...]
//                                    after the backward of optimizer step N
//                                    (1-based) the first trainable gradient is
//                                    +inf, as an fp16 overflow leaves it;
//   HOTLOOP_INJECT_KILL=POINT[:N]    the process kills itself (SIGKILL) at
//                                    POINT: step:N (after step N's backward),
//                                    checkpoint:N (step N's checkpoint written
//                                    to its temporary file, not yet renamed),
//                                    final-checkpoint (just after the last
//                                    step's checkpoint), final-evaluation
//                                    (inside the last evaluation);
//   HOTLOOP_INJECT_HANG=N            after step N's backward the training
//                                    thread blocks for good (a deadlock, a
//                                    stuck loader) while the process lives:
//                                    the other ranks wait in a collective;
//   HOTLOOP_INJECT_HANG_RANK=R       ... only on rank R;
//   HOTLOOP_FAKE_CUDA_GRAPH=1        not a fault, a seam: on the CPU the step
//                                    is the CUDA-graph step (static batch,
//                                    device scalars, the fallbacks) with a
//                                    backend whose capture records the body
//                                    and whose replay runs it.
// A value that does not parse is a UsageError naming the variable.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hotloop::train {

enum class KillPoint {
  None,
  Step,
  Checkpoint,
  FinalCheckpoint,
  FinalEvaluation
};

// Where HOTLOOP_INJECT_OOM_UNIT throws: unit `unit`'s forward or backward.
struct UnitFault {
  bool backward = false;
  std::size_t unit = 0;
};

struct FaultInjection {
  std::optional<std::int64_t> oom_above;
  std::optional<UnitFault> oom_unit;
  bool oom_whole = false;
  std::vector<std::int64_t> overflow_steps;
  KillPoint kill = KillPoint::None;
  std::int64_t kill_step = 0; // for Step and Checkpoint
  std::optional<std::int64_t> hang_step;
  bool fake_cuda_graph = false;

  // Throws c10::OutOfMemoryError when `samples` exceeds oom_above (and no
  // unit is named: then oom_in_unit does).
  void oom_if_above(std::int64_t samples) const;
  // Throws c10::OutOfMemoryError in the unit and pass oom_unit names when
  // `samples` exceeds oom_above.
  void oom_in_unit(std::size_t unit, bool backward, std::int64_t samples) const;
  // Throws c10::OutOfMemoryError where oom_whole is set.
  void oom_if_whole() const;
  // Whether step `step` (1-based) overflows.
  bool overflow_at(std::int64_t step) const;
  // SIGKILLs this process when `point` (at `step`, where it counts) is the
  // one asked for.
  void kill_at(KillPoint point, std::int64_t step = 0) const;
  // Blocks the calling thread for good when `step` is hang_step.
  void hang_at(std::int64_t step) const;
};

// Reads the variables above (for this rank: RANK, where set).
FaultInjection read_fault_injection();

} // namespace hotloop::train
