// Whether the client of a request still holds its connection, for replies written only at their end (a
// whole chat or completion): cpp-httplib 0.11 gives a handler neither its socket nor a way to ask. The
// connection's socket is found once among the process's descriptors by its two ends (the request's local
// and remote address and port, unique among open TCP connections); the client is gone once that socket
// reports a hang-up or reads as closed. A client that half-closes its end after sending (shutdown(SHUT_WR))
// looks gone too; HTTP clients keep both ends open while they wait. Linux (/proc/self/fd); elsewhere, or
// when the socket is not found, gone() stays false.
#pragma once

#include <httplib.h>

namespace tilellm::serve {

class PeerWatch {
 public:
  explicit PeerWatch(const httplib::Request& req);
  // Does not block. The descriptor stays the connection's while its handler runs, so asking is safe then.
  bool gone() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace tilellm::serve
