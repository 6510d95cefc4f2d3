# Writes ${CMAKE_BINARY_DIR}/generated/hotloop_git.h on every build, touching it only when the commit
# (or the dirty state) changed, so `hotloop --version` never reports a stale commit and an unchanged
# tree rebuilds nothing.

set(HOTLOOP_GIT_HEADER ${CMAKE_BINARY_DIR}/generated/hotloop_git.h)
add_custom_target(hotloop_git_info
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${HOTLOOP_GIT_HEADER}
          -P ${CMAKE_CURRENT_LIST_DIR}/WriteGitInfo.cmake
  BYPRODUCTS ${HOTLOOP_GIT_HEADER}
  COMMENT "" VERBATIM)
