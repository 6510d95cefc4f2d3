# The libraries hotloop uses besides LibTorch: Debian's packages (scripts/setup installs them).
#
# A machine without those packages (the project's GPU machine has no network and no apt) can build
# from HOTLOOP_DEPS_DIR instead: a folder holding copies of the header-only libraries under include/ and
# GoogleTest's sources under googletest/, as `scripts/gpu-check --prepare` makes it.

set(HOTLOOP_DEPS_DIR "" CACHE PATH "Fallback for missing packages: <dir>/include (headers) and <dir>/googletest (sources)")

# fmt is used header-only: LibTorch ships its own (newer) fmt headers on the include path ahead of
# Debian's, so linking Debian's compiled libfmt would mix two versions.
find_package(fmt QUIET)
if(TARGET fmt::fmt-header-only)
  add_library(hotloop_fmt ALIAS fmt::fmt-header-only)
else()
  add_library(hotloop_fmt INTERFACE) # LibTorch's bundled fmt headers
  target_compile_definitions(hotloop_fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

# A header-only package: its CMake target, or an interface target on HOTLOOP_DEPS_DIR/include.
macro(hotloop_header_only package target)
  find_package(${package} QUIET)
  if(NOT TARGET ${target})
    if(NOT HOTLOOP_DEPS_DIR OR NOT EXISTS ${HOTLOOP_DEPS_DIR}/include)
      message(FATAL_ERROR "hotloop: ${package} not found. Run ./scripts/setup, or pass -DHOTLOOP_DEPS_DIR=<dir>.")
    endif()
    add_library(${target} INTERFACE IMPORTED)
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${HOTLOOP_DEPS_DIR}/include)
    message(STATUS "hotloop: ${package} from ${HOTLOOP_DEPS_DIR}/include")
  endif()
endmacro()

# zlib reads the gzip-compressed IDX files of Fashion-MNIST. Without its -dev package, the header can
# come from HOTLOOP_DEPS_DIR and the library from the runtime libz.so.1 every system has.
find_package(ZLIB QUIET)
if(NOT TARGET ZLIB::ZLIB)
  find_library(HOTLOOP_LIBZ NAMES z libz.so.1)
  if(NOT HOTLOOP_LIBZ OR NOT EXISTS ${HOTLOOP_DEPS_DIR}/include/zlib.h)
    message(FATAL_ERROR "hotloop: zlib not found. Run ./scripts/setup (zlib1g-dev), or pass -DHOTLOOP_DEPS_DIR=<dir>.")
  endif()
  add_library(ZLIB::ZLIB UNKNOWN IMPORTED)
  set_target_properties(ZLIB::ZLIB PROPERTIES IMPORTED_LOCATION ${HOTLOOP_LIBZ}
                                              INTERFACE_INCLUDE_DIRECTORIES ${HOTLOOP_DEPS_DIR}/include)
  message(STATUS "hotloop: zlib ${HOTLOOP_LIBZ} with headers from ${HOTLOOP_DEPS_DIR}/include")
endif()

# Image decoders: TurboJPEG (libjpeg-turbo's API) and libpng.
find_path(HOTLOOP_TURBOJPEG_INCLUDE turbojpeg.h HINTS ${HOTLOOP_DEPS_DIR}/include)
include(${CMAKE_CURRENT_LIST_DIR}/HotloopCarriedLibrary.cmake)
hotloop_find_carried_library(HOTLOOP_TURBOJPEG_LIB turbojpeg libturbojpeg.so.0)
if(NOT HOTLOOP_TURBOJPEG_INCLUDE OR NOT HOTLOOP_TURBOJPEG_LIB)
  message(FATAL_ERROR "hotloop: TurboJPEG not found. Run ./scripts/setup (libturbojpeg0-dev), or pass -DHOTLOOP_DEPS_DIR=<dir>.")
endif()
add_library(hotloop::turbojpeg UNKNOWN IMPORTED)
set_target_properties(hotloop::turbojpeg PROPERTIES IMPORTED_LOCATION ${HOTLOOP_TURBOJPEG_LIB}
                                                    INTERFACE_INCLUDE_DIRECTORIES ${HOTLOOP_TURBOJPEG_INCLUDE})
# libjpeg-turbo's libjpeg API (jpeglib.h), for region and DCT-scaled decodes (TurboJPEG 2.x has neither).
find_path(HOTLOOP_JPEG_INCLUDE jpeglib.h HINTS ${HOTLOOP_DEPS_DIR}/include)
hotloop_find_carried_library(HOTLOOP_JPEG_LIB jpeg libjpeg.so.62)
if(NOT HOTLOOP_JPEG_INCLUDE OR NOT HOTLOOP_JPEG_LIB)
  message(FATAL_ERROR "hotloop: libjpeg-turbo's jpeglib.h not found. Run ./scripts/setup (libjpeg62-turbo-dev), or pass -DHOTLOOP_DEPS_DIR=<dir>.")
endif()
add_library(hotloop::libjpeg UNKNOWN IMPORTED)
set_target_properties(hotloop::libjpeg PROPERTIES IMPORTED_LOCATION ${HOTLOOP_JPEG_LIB}
                                                  INTERFACE_INCLUDE_DIRECTORIES ${HOTLOOP_JPEG_INCLUDE})
if(HOTLOOP_DEPS_DIR)
  list(APPEND CMAKE_PREFIX_PATH ${HOTLOOP_DEPS_DIR})
endif()
find_package(PNG REQUIRED)

hotloop_header_only(nlohmann_json nlohmann_json::nlohmann_json)
hotloop_header_only(CLI11 CLI11::CLI11)
# toml++ reads `--config FILE.toml`. Debian's package is the compiled variant; a HOTLOOP_DEPS_DIR copy of
# its headers is used header-only.
hotloop_header_only(tomlplusplus tomlplusplus::tomlplusplus)
if(NOT tomlplusplus_FOUND)
  set_property(TARGET tomlplusplus::tomlplusplus APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS TOML_HEADER_ONLY=1)
endif()

if(HOTLOOP_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT TARGET GTest::gtest_main)
    if(NOT HOTLOOP_DEPS_DIR OR NOT EXISTS ${HOTLOOP_DEPS_DIR}/googletest/CMakeLists.txt)
      message(FATAL_ERROR "hotloop: GoogleTest not found. Run ./scripts/setup, pass -DHOTLOOP_DEPS_DIR=<dir>, "
                          "or -DHOTLOOP_BUILD_TESTS=OFF.")
    endif()
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory(${HOTLOOP_DEPS_DIR}/googletest ${CMAKE_BINARY_DIR}/_deps/googletest EXCLUDE_FROM_ALL)
    if(NOT TARGET GTest::gtest_main)
      add_library(GTest::gtest_main ALIAS gtest_main)
    endif()
    message(STATUS "hotloop: GoogleTest built from ${HOTLOOP_DEPS_DIR}/googletest")
  endif()
endif()
