# Finds LibTorch.
#
# Default: the torch package of the project's venv (.venv/bin/python), located through
# torch.utils.cmake_prefix_path, so the C++ build links the very libraries pip installed.
# Another LibTorch (>= 2.5: SDPA's enable_gqa, e.g. the official libtorch archive): pass -DTorch_DIR=<libtorch>/share/cmake/Torch.
#
# Sets HOTLOOP_TORCH_HAS_CUDA and HOTLOOP_TORCH_CUDA_ARCH_LIST (the SM list LibTorch was compiled for,
# which LibTorch's C++ API does not expose; doctor compares the GPU's compute capability against it).

if(NOT HOTLOOP_PYTHON AND SKBUILD AND Python3_EXECUTABLE)
  # `pip install .` (pyproject.toml): the torch of the Python that runs pip.
  set(HOTLOOP_PYTHON ${Python3_EXECUTABLE})
endif()
if(NOT HOTLOOP_PYTHON)
  if(EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python)
    set(HOTLOOP_PYTHON ${CMAKE_SOURCE_DIR}/.venv/bin/python)
  else()
    find_program(HOTLOOP_PYTHON_FOUND NAMES python3 python)
    set(HOTLOOP_PYTHON ${HOTLOOP_PYTHON_FOUND})
  endif()
endif()

set(_hotloop_torch_py_ok FALSE)
if(HOTLOOP_PYTHON)
  execute_process(
    COMMAND ${HOTLOOP_PYTHON} -c
            "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(' '.join(torch._C._cuda_getArchFlags().split()) if torch.version.cuda else '')"
    OUTPUT_VARIABLE _hotloop_torch_py_out
    RESULT_VARIABLE _hotloop_torch_py_rc
    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_hotloop_torch_py_rc EQUAL 0)
    set(_hotloop_torch_py_ok TRUE)
    string(REPLACE "\n" ";" _hotloop_torch_py_lines "${_hotloop_torch_py_out}")
    list(GET _hotloop_torch_py_lines 0 _hotloop_torch_prefix)
    list(LENGTH _hotloop_torch_py_lines _n)
    if(_n GREATER 1)
      list(GET _hotloop_torch_py_lines 1 _hotloop_torch_archs)
    endif()
  endif()
endif()

if(NOT Torch_DIR)
  if(NOT _hotloop_torch_py_ok)
    message(FATAL_ERROR
      "hotloop: LibTorch not found. Run ./scripts/setup (it installs torch==2.11.0 into .venv), "
      "or pass -DTorch_DIR=<libtorch>/share/cmake/Torch, or -DHOTLOOP_PYTHON=<python with torch>.")
  endif()
  list(APPEND CMAKE_PREFIX_PATH ${_hotloop_torch_prefix})
endif()

if(NOT HOTLOOP_TORCH_CUDA_ARCH_LIST AND _hotloop_torch_archs)
  set(HOTLOOP_TORCH_CUDA_ARCH_LIST "${_hotloop_torch_archs}" CACHE STRING "" FORCE)
endif()

# LibTorch's CMake enables the CUDA language for its CUDA build; point it at the toolkit and keep it from
# probing for a GPU (the development and CI machines have none).
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;9.0")
endif()

find_package(Torch REQUIRED)
# Where a program built against the installed hotloop package finds the same LibTorch (the tests' example).
if(_hotloop_torch_py_ok)
  set(HOTLOOP_TORCH_PREFIX "${_hotloop_torch_prefix}")
else()
  get_filename_component(HOTLOOP_TORCH_PREFIX "${Torch_DIR}/../../.." ABSOLUTE)
endif()

if(TORCH_CUDA_LIBRARIES)
  set(HOTLOOP_TORCH_HAS_CUDA ON)
else()
  set(HOTLOOP_TORCH_HAS_CUDA OFF)
endif()
message(STATUS "hotloop: LibTorch ${Torch_VERSION} (CUDA: ${HOTLOOP_TORCH_HAS_CUDA}, arch list: '${HOTLOOP_TORCH_CUDA_ARCH_LIST}')")
