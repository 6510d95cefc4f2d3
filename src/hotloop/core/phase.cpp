#include "hotloop/core/phase.h"

namespace hotloop {

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::Start:
      return "start";
    case Phase::Data:
      return "data";
    case Phase::Forward:
      return "forward";
    case Phase::Backward:
      return "backward";
    case Phase::AllReduce:
      return "all-reduce";
    case Phase::Optimizer:
      return "optimizer";
    case Phase::Graph:
      return "graph";
    case Phase::Evaluation:
      return "evaluation";
    case Phase::Checkpoint:
      return "checkpoint";
    case Phase::Finished:
      return "finished";
    case Phase::Failed:
      return "failed";
  }
  return "unknown";
}

} // namespace hotloop
