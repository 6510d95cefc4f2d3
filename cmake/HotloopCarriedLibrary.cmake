# hotloop_find_carried_library(VAR NAME...): find_library for a library whose headers may come from
# HOTLOOP_DEPS_DIR/include (scripts/gpu-check --prepare carries both there). Every name is tried in
# HOTLOOP_DEPS_DIR/lib before any system folder (NAMES_PER_DIR), so the carried libjpeg.so.62 wins over a
# system libjpeg.so of another version (libjpeg-turbo 8's, say) that the carried version-62 headers would
# fail at run time ("Wrong JPEG library version"). Without HOTLOOP_DEPS_DIR: the system's, as before.
function(hotloop_find_carried_library var)
  if(HOTLOOP_DEPS_DIR)
    find_library(${var} NAMES ${ARGN} NAMES_PER_DIR HINTS ${HOTLOOP_DEPS_DIR}/lib)
  else()
    find_library(${var} NAMES ${ARGN} NAMES_PER_DIR)
  endif()
endfunction()
