#include "runtime/comm/Socket.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace octet::comm {

int millisecondsUntil(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  if (left.count() <= 0)
    return 0;
  return left.count() > 1 << 30 ? 1 << 30 : int(left.count());
}

std::string describeDuration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0)
    return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

Fd &Fd::operator=(Fd &&other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

void setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo *a) const { ::freeaddrinfo(a); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoDeleter>;

StatusOr<AddrInfoList> resolve(const std::string &host, int port,
                               bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo *list = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0)
    return Status::error("cannot resolve host '" + host +
                         "': " + ::gai_strerror(rc));
  return AddrInfoList(list);
}

int boundPortOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    return -1;
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port);
}

} // namespace

// Runs `attempt` on a new socket for each address `host` resolves to, and
// returns the first socket it accepts. It explains a failure in `lastError`
// (the next address is tried) or `fatal` (none is).
template <typename Attempt>
StatusOr<Fd> firstAddress(const std::string &host, int port, bool passive,
                          const std::string &action, Attempt &&attempt) {
  auto list = resolve(host, port, passive);
  if (!list)
    return list.status();
  std::string lastError = "no address";
  for (addrinfo *a = list->get(); a; a = a->ai_next) {
    Fd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      lastError = std::strerror(errno);
      continue;
    }
    Status fatal = Status::ok();
    if (attempt(*a, fd.get(), lastError, fatal))
      return fd;
    if (!fatal)
      return fatal;
  }
  return Status::error("cannot " + action + " " + host + ":" +
                       std::to_string(port) + ": " + lastError);
}

StatusOr<Fd> listenTcp(const std::string &host, int port, int *boundPort,
                       const std::string &what) {
  auto listening = [&](const addrinfo &a, int fd, std::string &lastError,
                       Status &fatal) {
    // A listener that just exited leaves TIME_WAIT connections; reuse lets
    // the next job bind at once (it never shares a live listener's port).
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a.ai_addr, a.ai_addrlen) != 0) {
      if (errno == EADDRINUSE)
        fatal = Status::error(what + "=" + std::to_string(port) +
                              " is in use on " + host +
                              " (another job, or a process left from an "
                              "earlier one): choose a free port, or stop the "
                              "process that holds it");
      else if (errno == EADDRNOTAVAIL)
        fatal = Status::error("'" + host +
                              "' is not an address of this machine, so the "
                              "store cannot listen there: rank 0 must run on "
                              "the host MASTER_ADDR names");
      lastError = std::strerror(errno);
      return false;
    }
    if (::listen(fd, 128) != 0) {
      lastError = std::strerror(errno);
      return false;
    }
    if (boundPort)
      *boundPort = boundPortOf(fd);
    return true;
  };
  return firstAddress(host, port, /*passive=*/true, "listen on", listening);
}

StatusOr<Fd> connectTcp(const std::string &host, int port, Deadline deadline,
                        bool *refused) {
  *refused = false;
  auto connecting = [&](const addrinfo &a, int fd, std::string &lastError,
                        Status &) {
    setNonBlocking(fd);
    int err = ::connect(fd, a.ai_addr, a.ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, millisecondsUntil(deadline)) <= 0) {
        lastError = "connection attempt timed out";
        *refused = true;
        return false;
      }
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      lastError = std::strerror(err);
      *refused = err == ECONNREFUSED || err == ENETUNREACH ||
                 err == EHOSTUNREACH || err == ETIMEDOUT;
      return false;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return true;
  };
  return firstAddress(host, port, /*passive=*/false, "connect to", connecting);
}

IoOutcome ioOutcome(long result) {
  if (result > 0)
    return IoOutcome::Moved;
  if (result < 0 && errno == EINTR)
    return IoOutcome::Again;
  if (result < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return IoOutcome::Later;
  return IoOutcome::Over;
}

// Waits until `fd` is ready for `events` or the deadline: false at the
// deadline.
static bool waitReady(int fd, short events, Deadline deadline) {
  pollfd p{fd, events, 0};
  int ready = ::poll(&p, 1, millisecondsUntil(deadline));
  return ready != 0;
}

// sendAll and recvAll: moves `size` bytes one way before the deadline.
static Status transfer(int fd, char *p, size_t size, bool sending,
                       Deadline deadline, bool *closed) {
  if (closed)
    *closed = false;
  while (size > 0) {
    ssize_t n =
        sending ? ::send(fd, p, size, MSG_NOSIGNAL) : ::recv(fd, p, size, 0);
    IoOutcome outcome = ioOutcome(n);
    if (outcome == IoOutcome::Moved) {
      p += n;
      size -= size_t(n);
    } else if (outcome == IoOutcome::Later &&
               !waitReady(fd, sending ? POLLOUT : POLLIN, deadline)) {
      return Status::error(sending ? "timed out sending to the peer"
                                   : "timed out waiting for the peer's answer");
    } else if (outcome == IoOutcome::Over) {
      if (closed)
        *closed = true;
      return Status::error(n == 0 ? std::string("the peer closed the "
                                                "connection")
                                  : std::string("connection lost: ") +
                                        std::strerror(errno));
    }
  }
  return Status::ok();
}

Status sendAll(int fd, const void *data, size_t size, Deadline deadline) {
  return transfer(fd, static_cast<char *>(const_cast<void *>(data)), size,
                  /*sending=*/true, deadline, nullptr);
}

Status recvAll(int fd, void *data, size_t size, Deadline deadline,
               bool *closed) {
  return transfer(fd, static_cast<char *>(data), size, /*sending=*/false,
                  deadline, closed);
}

} // namespace octet::comm
