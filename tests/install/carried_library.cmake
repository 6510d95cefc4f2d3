# cmake -DWORK=DIR -DMODULE=cmake/HotloopCarriedLibrary.cmake -P carried_library.cmake
# A system folder with libjpeg.so (another version) and a carried .deps/lib with libjpeg.so.62: the carried
# one is found; without a deps folder, the system's. Before, find_library tried the
# first name ("jpeg": libjpeg.so) in every folder first and linked the system's against .deps' headers.
set(CMAKE_FIND_LIBRARY_PREFIXES lib)
set(CMAKE_FIND_LIBRARY_SUFFIXES .so .a)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/system ${WORK}/deps/lib)
file(TOUCH ${WORK}/system/libjpeg.so ${WORK}/deps/lib/libjpeg.so.62)
set(CMAKE_SYSTEM_LIBRARY_PATH ${WORK}/system) # where the platform's folders are searched
include(${MODULE})

set(HOTLOOP_DEPS_DIR ${WORK}/deps)
hotloop_find_carried_library(CARRIED jpeg libjpeg.so.62)
if(NOT CARRIED STREQUAL "${WORK}/deps/lib/libjpeg.so.62")
  message(FATAL_ERROR "with HOTLOOP_DEPS_DIR: found ${CARRIED}, expected the carried ${WORK}/deps/lib/libjpeg.so.62")
endif()
set(HOTLOOP_DEPS_DIR "")
hotloop_find_carried_library(SYSTEM jpeg libjpeg.so.62)
if(NOT SYSTEM STREQUAL "${WORK}/system/libjpeg.so")
  message(FATAL_ERROR "without HOTLOOP_DEPS_DIR: found ${SYSTEM}, expected the system's ${WORK}/system/libjpeg.so")
endif()
message(STATUS "carried: ${CARRIED}; system: ${SYSTEM}")
