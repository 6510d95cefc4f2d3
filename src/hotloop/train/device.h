#pragma once
// The device a run's --device means: auto is CUDA device 0 where LibTorch can
// use CUDA, else the CPU; cuda is cuda:0. One resolver for the trainer and
// for what is decided before it is made (the recipe's precision).

#include <string>

#include <c10/core/Device.h>

namespace hotloop::train {

// `text`: auto | cpu | cuda[:N]. Throws EnvError for a CUDA device without
// CUDA.
c10::Device resolve_device(const std::string& text);

} // namespace hotloop::train
