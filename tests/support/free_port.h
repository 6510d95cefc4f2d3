#pragma once
// A TCP port no one is listening on: the kernel's pick for a socket bound to
// port 0 on loopback, released for the test to bind. Tests that ran in
// parallel once drew ports from overlapping pid-based ranges; the kernel does
// not hand the same free port to two binds at once, and picks at random
// across its ephemeral range.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace hotloop::test {

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    throw std::runtime_error("free_port: socket() failed");
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("free_port: bind to port 0 failed");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

} // namespace hotloop::test
