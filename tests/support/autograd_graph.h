#pragma once
// The autograd graph behind a tensor, for tests that must see how it was
// built (a recompute node per checkpointed segment, say).

#include <cstddef>
#include <string>
#include <unordered_set>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>

namespace hotloop::test {

// How many nodes of `out`'s backward graph have `part` in their name
// (a custom autograd Function's node is named after its class).
inline std::size_t count_graph_nodes(
    const at::Tensor& out,
    const std::string& part) {
  std::vector<torch::autograd::Node*> stack;
  std::unordered_set<torch::autograd::Node*> seen;
  if (const auto& f = out.grad_fn()) {
    stack.push_back(f.get());
  }
  std::size_t count = 0;
  while (!stack.empty()) {
    torch::autograd::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) {
      continue;
    }
    if (n->name().find(part) != std::string::npos) {
      ++count;
    }
    for (const auto& e : n->next_edges()) {
      if (e.function) {
        stack.push_back(e.function.get());
      }
    }
  }
  return count;
}

} // namespace hotloop::test
