#pragma once
// libjpeg reports errors through error_exit, which must not return: hotloop's
// handlers jump back to the caller's setjmp with the message kept. Shared by
// the region decoder (jpeg_region.cpp) and the writer (image_encode.cpp).

// jpeglib.h needs size_t and FILE declared first.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <csetjmp>

namespace hotloop::data::libjpeg {

struct ErrorManager {
  jpeg_error_mgr pub{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] inline void jump_out(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Level -1 is a warning: corrupt entropy data, a premature end of the file.
// They stop the work, as TJFLAG_STOPONWARNING makes them stop a full decode
// (a truncated file otherwise "decodes" with a gray bottom). Trace messages
// (level >= 0) are dropped.
inline void on_message(j_common_ptr c, int level) {
  if (level < 0) {
    jump_out(c);
  }
}

// Points `err` at `e` with both handlers; call before jpeg_create_*.
inline jpeg_error_mgr* install(ErrorManager& e) {
  jpeg_error_mgr* err = jpeg_std_error(&e.pub);
  e.pub.error_exit = jump_out;
  e.pub.emit_message = on_message;
  return err;
}

} // namespace hotloop::data::libjpeg
