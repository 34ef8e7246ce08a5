// PeerWatch: the request's socket found by its addresses, then polled without blocking.
#include "peer_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace tilellm::serve {
namespace {

// An address as cpp-httplib writes it into a Request (numeric host, port), or false.
bool numeric(const sockaddr_storage& a, socklen_t len, std::string* host, int* port) {
  char h[NI_MAXHOST], s[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof(h), s, sizeof(s),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  *host = h;
  *port = std::atoi(s);
  return true;
}

bool same_end(const sockaddr_storage& a, socklen_t len, const std::string& host, int port) {
  std::string h;
  int p = -1;
  return numeric(a, len, &h, &p) && p == port && h == host;
}

}  // namespace

PeerWatch::PeerWatch(const httplib::Request& req) {
  if (req.remote_port < 0 || req.local_port < 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
      continue;
    if (same_end(peer, peer_len, req.remote_addr, req.remote_port) &&
        same_end(local, local_len, req.local_addr, req.local_port)) {
      fd_ = int(fd);
      break;
    }
  }
  closedir(dir);
}

bool PeerWatch::gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, short(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  // Readable: a pipelined request (still there) or the end of the stream (gone).
  char c;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace tilellm::serve
