#pragma once
// A Gloo process group over loopback for rank `rank` of `world_size`, as a
// test's threads make one each (the store on `port`, test::free_port()'s).

#include <chrono>
#include <memory>

#include "hotloop/parallel/dist_env.h"
#include "hotloop/parallel/process_group.h"

namespace hotloop::test {

inline std::shared_ptr<parallel::ProcessGroup> loopback_group(
    int rank,
    int world_size,
    int port) {
  parallel::DistEnv env;
  env.rank = rank;
  env.world_size = world_size;
  env.master_port = port;
  env.source = "test";
  parallel::GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  return parallel::ProcessGroup::create(env, o);
}

} // namespace hotloop::test
