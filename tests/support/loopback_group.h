#pragma once
// A Gloo process group over loopback for rank `rank` of `world_size`, as a
// test's threads make one each (the store on `port`, test::free_port()'s).

#include <chrono>
#include <future>
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

// Runs `body(rank, group)` on two ranks (threads of this process, a free
// port each time) and waits for both.
template <typename F>
void two_loopback_ranks(int port, F body) {
  auto run = [&](int r) { body(r, loopback_group(r, 2, port)); };
  auto f0 = std::async(std::launch::async, run, 0);
  auto f1 = std::async(std::launch::async, run, 1);
  f0.get();
  f1.get();
}

} // namespace hotloop::test
