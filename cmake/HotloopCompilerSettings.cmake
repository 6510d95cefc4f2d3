# Warnings, sanitizers and ccache for every hotloop target.

add_library(hotloop_warnings INTERFACE)
target_compile_options(hotloop_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
                                                  -Wno-unused-parameter)
if(HOTLOOP_WERROR)
  target_compile_options(hotloop_warnings INTERFACE -Werror)
endif()

if(HOTLOOP_SANITIZE)
  # LibTorch itself is not instrumented; ASan still catches hotloop's own heap and stack bugs.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

if(HOTLOOP_USE_CCACHE)
  find_program(HOTLOOP_CCACHE ccache)
  if(HOTLOOP_CCACHE)
    # Precompiled headers are only cached when ccache is told to tolerate them.
    set(CMAKE_CXX_COMPILER_LAUNCHER
        ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
        ${HOTLOOP_CCACHE})
    set(CMAKE_C_COMPILER_LAUNCHER ${CMAKE_CXX_COMPILER_LAUNCHER})
    message(STATUS "hotloop: compiling through ccache (${HOTLOOP_CCACHE})")
  endif()
endif()
