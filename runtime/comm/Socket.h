#ifndef OCTET_RUNTIME_COMM_SOCKET_H
#define OCTET_RUNTIME_COMM_SOCKET_H

// TCP plumbing for the store and the launcher: every blocking operation
// takes a deadline, so a peer that stops answering is an error, never a
// hang. Linux sockets and poll(2) only.

#include "support/Status.h"

#include <chrono>
#include <cstddef>
#include <string>

namespace octet::comm {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Milliseconds left until `deadline` (0 when past), for poll(2).
int millisecondsUntil(Deadline deadline);
// "30 s", "250 ms": durations in messages.
std::string describeDuration(std::chrono::milliseconds d);

// An owned file descriptor.
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd &&other) noexcept : fd_(other.release()) {}
  Fd &operator=(Fd &&other) noexcept;
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

private:
  int fd_ = -1;
};

// A listening socket bound to `host`:`port` (port 0: one the kernel picks;
// boundPort tells which). `what` names the setting the port came from, for
// the message when it is in use ("MASTER_PORT").
StatusOr<Fd> listenTcp(const std::string &host, int port, int *boundPort,
                       const std::string &what);

// One connection attempt. A refused or unreachable peer is reported with
// `refused` set, so callers can retry until their deadline.
StatusOr<Fd> connectTcp(const std::string &host, int port, Deadline deadline,
                        bool *refused);

// Writes or reads exactly `size` bytes before `deadline`. A peer that closed
// the connection makes `closed` true (when given) besides the error.
Status sendAll(int fd, const void *data, size_t size, Deadline deadline);
Status recvAll(int fd, void *data, size_t size, Deadline deadline,
               bool *closed = nullptr);

void setNonBlocking(int fd);

// What the result of a send(2) or recv(2) on a non-blocking socket means:
// bytes moved, try again now (EINTR), try when poll says so (EAGAIN), or the
// connection is over (end of stream, or an error).
enum class IoOutcome { Moved, Again, Later, Over };
IoOutcome ioOutcome(long result);

} // namespace octet::comm

#endif
