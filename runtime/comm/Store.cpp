#include "runtime/comm/Store.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace octet::comm {

namespace {

// Request ops (the first byte of a request).
enum class Op : uint8_t { Hello = 1, Set, Add, MultiGet, Fail, Bye };

// A message larger than this is a protocol error (keys and values are ids,
// hashes and one-line notices).
constexpr uint32_t kMaxMessage = 16u << 20;

class Writer {
public:
  Writer &u8(uint8_t v) {
    out_.push_back(char(v));
    return *this;
  }
  Writer &u32(uint32_t v) {
    for (int i = 0; i < 4; ++i)
      out_.push_back(char((v >> (8 * i)) & 0xff));
    return *this;
  }
  Writer &i64(int64_t v) {
    uint64_t u = uint64_t(v);
    for (int i = 0; i < 8; ++i)
      out_.push_back(char((u >> (8 * i)) & 0xff));
    return *this;
  }
  Writer &str(const std::string &s) {
    u32(uint32_t(s.size()));
    out_ += s;
    return *this;
  }
  const std::string &body() const { return out_; }

private:
  std::string out_;
};

class Reader {
public:
  explicit Reader(const std::string &in) : in_(in) {}
  bool u8(uint8_t &v) {
    if (pos_ + 1 > in_.size())
      return false;
    v = uint8_t(in_[pos_++]);
    return true;
  }
  bool u32(uint32_t &v) {
    if (pos_ + 4 > in_.size())
      return false;
    v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(uint8_t(in_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool i64(int64_t &v) {
    if (pos_ + 8 > in_.size())
      return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i)
      u |= uint64_t(uint8_t(in_[pos_ + i])) << (8 * i);
    pos_ += 8;
    v = int64_t(u);
    return true;
  }
  bool str(std::string &s) {
    uint32_t n;
    if (!u32(n) || pos_ + n > in_.size())
      return false;
    s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }

private:
  const std::string &in_;
  size_t pos_ = 0;
};

std::string lostRankNotice(int rank) {
  return "rank " + std::to_string(rank) +
         " is lost: its connection to the store closed before it finished "
         "(killed, crashed, or exited early)";
}

} // namespace

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

struct StoreServer::State {
  struct Connection {
    Fd fd;
    std::string in, out;
    int rank = -1;
    bool goodbye = false;
    bool noticeSent = false;
    bool closed = false;
  };

  Fd listener;
  Fd wakeRead, wakeWrite;
  int worldSize = 0;
  std::thread thread;

  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  bool stopping = false;
  std::map<std::string, std::string> values;
  std::string failure;
  std::vector<std::unique_ptr<Connection>> connections;

  void setFailure(const std::string &message) {
    if (failure.empty())
      failure = message;
  }
  bool rankConnected(int rank) const {
    for (const auto &c : connections)
      if (c->rank == rank && !c->closed && !c->goodbye)
        return true;
    return false;
  }
  std::string answer(Connection &c, const std::string &request);
  void readFrom(Connection &c);
  void flush(Connection &c);
  void accept();
};

std::string StoreServer::State::answer(Connection &c,
                                       const std::string &request) {
  Reader in(request);
  Writer ok;
  std::string error;
  uint8_t op = 0;
  in.u8(op);
  switch (Op(op)) {
  case Op::Hello: {
    uint32_t rank = 0, world = 0;
    if (!in.u32(rank) || !in.u32(world)) {
      error = "malformed hello";
      break;
    }
    if (int(world) != worldSize)
      error = "rank " + std::to_string(rank) +
              " has WORLD_SIZE=" + std::to_string(world) +
              " but rank 0 has WORLD_SIZE=" + std::to_string(worldSize) +
              ": start every rank with the same WORLD_SIZE";
    else if (int(rank) >= worldSize)
      error = "RANK=" + std::to_string(rank) +
              " is outside WORLD_SIZE=" + std::to_string(worldSize) +
              " (ranks are 0.." + std::to_string(worldSize - 1) + ")";
    else if (rankConnected(int(rank)))
      error = "two processes joined as rank " + std::to_string(rank) +
              ": give each process its own RANK";
    if (!error.empty()) {
      setFailure(error);
      break;
    }
    c.rank = int(rank);
    break;
  }
  case Op::Set: {
    std::string key, value;
    if (!in.str(key) || !in.str(value)) {
      error = "malformed set";
      break;
    }
    values[key] = value;
    break;
  }
  case Op::Add: {
    std::string key;
    int64_t delta = 0;
    if (!in.str(key) || !in.i64(delta)) {
      error = "malformed add";
      break;
    }
    int64_t now = 0;
    auto it = values.find(key);
    if (it != values.end())
      now = std::strtoll(it->second.c_str(), nullptr, 10);
    now += delta;
    values[key] = std::to_string(now);
    ok.i64(now);
    break;
  }
  case Op::MultiGet: {
    uint32_t n = 0;
    if (!in.u32(n)) {
      error = "malformed multi-get";
      break;
    }
    ok.u32(n);
    for (uint32_t i = 0; i < n; ++i) {
      std::string key;
      if (!in.str(key)) {
        error = "malformed multi-get";
        break;
      }
      auto it = values.find(key);
      ok.u8(it != values.end()).str(it != values.end() ? it->second : "");
    }
    break;
  }
  case Op::Fail: {
    std::string message;
    if (!in.str(message)) {
      error = "malformed failure report";
      break;
    }
    setFailure(message);
    break;
  }
  case Op::Bye:
    c.goodbye = true;
    break;
  default:
    error = "unknown store request " + std::to_string(op) +
            " (a client of another octet version, or not octet)";
  }
  Writer reply;
  reply.u8(error.empty() ? 0 : 1).str(failure);
  if (!failure.empty())
    c.noticeSent = true;
  if (!error.empty())
    reply.str(error);
  return reply.body() + (error.empty() ? ok.body() : std::string());
}

void StoreServer::State::readFrom(Connection &c) {
  char buffer[64 << 10];
  IoOutcome outcome = IoOutcome::Moved;
  while (outcome == IoOutcome::Moved || outcome == IoOutcome::Again) {
    ssize_t n = ::recv(c.fd.get(), buffer, sizeof(buffer), 0);
    outcome = ioOutcome(n);
    if (outcome == IoOutcome::Moved)
      c.in.append(buffer, size_t(n));
  }
  c.closed = outcome == IoOutcome::Over;
  // Whole messages only; the rest waits for more bytes.
  while (!c.closed && c.in.size() >= 4) {
    uint32_t size = 0;
    Reader(c.in).u32(size);
    c.closed = size > kMaxMessage;
    if (c.closed || c.in.size() < 4 + size_t(size))
      break;
    std::string request = c.in.substr(4, size);
    c.in.erase(0, 4 + size_t(size));
    c.out += Writer().str(answer(c, request)).body();
  }
}

void StoreServer::State::flush(Connection &c) {
  while (!c.out.empty() && !c.closed) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    IoOutcome outcome = ioOutcome(n);
    if (outcome == IoOutcome::Moved)
      c.out.erase(0, size_t(n));
    else if (outcome == IoOutcome::Later)
      return;
    else
      c.closed = outcome == IoOutcome::Over;
  }
}

void StoreServer::State::accept() {
  while (true) {
    int fd = ::accept4(listener.get(), nullptr, nullptr,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    auto c = std::make_unique<Connection>();
    c->fd = Fd(fd);
    connections.push_back(std::move(c));
  }
}

StatusOr<std::unique_ptr<StoreServer>>
StoreServer::start(const std::string &host, int port, int worldSize,
                   const std::string &portSetting) {
  std::unique_ptr<StoreServer> server(new StoreServer());
  server->state_ = std::make_unique<State>();
  State &s = *server->state_;
  s.worldSize = worldSize;
  auto listener = listenTcp(host, port, &server->port_, portSetting);
  if (!listener)
    return listener.status();
  s.listener = std::move(*listener);
  setNonBlocking(s.listener.get());
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::error(std::string("cannot create the store's wake pipe: ") +
                         std::strerror(errno));
  s.wakeRead = Fd(pipeFds[0]);
  s.wakeWrite = Fd(pipeFds[1]);
  s.thread = std::thread([srv = server.get()] { srv->serve(); });
  return server;
}

StoreServer::~StoreServer() {
  if (!state_)
    return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(state_->wakeWrite.get(), &byte, 1);
  if (state_->thread.joinable())
    state_->thread.join();
}

void StoreServer::serve() {
  State &s = *state_;
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({s.wakeRead.get(), POLLIN, 0});
    fds.push_back({s.listener.get(), POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (const auto &c : s.connections)
        fds.push_back(
            {c->fd.get(), short(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR)
      continue;
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.stopping)
      return;
    if (fds[0].revents) {
      char drain[64];
      while (::read(s.wakeRead.get(), drain, sizeof(drain)) > 0) {
      }
    }
    // Connections accepted below are polled from the next round on; the
    // first fds.size() - 2 connections line up with fds[2..].
    size_t polled = fds.size() - 2;
    for (size_t i = 0; i < polled; ++i) {
      State::Connection &c = *s.connections[i];
      if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))
        s.readFrom(c);
      if (!c.closed)
        s.flush(c);
    }
    if (fds[1].revents & POLLIN)
      s.accept();
    auto closed =
        std::stable_partition(s.connections.begin(), s.connections.end(),
                              [](const auto &c) { return !c->closed; });
    for (auto it = closed; it != s.connections.end(); ++it)
      if ((*it)->rank >= 0 && !(*it)->goodbye)
        s.setFailure(lostRankNotice((*it)->rank));
    s.connections.erase(closed, s.connections.end());
    s.changed.notify_all();
  }
}

std::string StoreServer::failure() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->failure;
}

bool StoreServer::waitForRanksToLeave(Deadline deadline) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->changed.wait_until(lock, deadline, [&] {
    for (const auto &c : state_->connections)
      if (c->rank >= 0 && !c->goodbye)
        return false;
    return true;
  });
}

bool StoreServer::waitForFailureDelivered(Deadline deadline) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->changed.wait_until(lock, deadline, [&] {
    for (const auto &c : state_->connections)
      if (c->rank >= 0 && !c->goodbye && (!c->noticeSent || !c->out.empty()))
        return false;
    return true;
  });
}

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

StatusOr<std::unique_ptr<StoreClient>>
StoreClient::connect(const std::string &host, int port, int rank, int worldSize,
                     const Options &options) {
  std::unique_ptr<StoreClient> client(new StoreClient());
  client->rank_ = rank;
  client->options_ = options;
  client->address_ = host + ":" + std::to_string(port);
  Deadline deadline = Clock::now() + options.connectTimeout;
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    bool refused = false;
    auto fd = connectTcp(host, port, deadline, &refused);
    if (fd) {
      client->fd_ = std::move(*fd);
      break;
    }
    if (!refused)
      return fd.status();
    if (Clock::now() + pause >= deadline)
      return Status::error(
          "rank " + std::to_string(rank) + " found no store at " +
          client->address_ + " within " +
          describeDuration(options.connectTimeout) +
          " (MASTER_ADDR:MASTER_PORT): rank 0 did not start, failed before "
          "it listened, or listens elsewhere; start rank 0 with the same "
          "MASTER_ADDR and MASTER_PORT");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  Writer hello;
  hello.u8(uint8_t(Op::Hello)).u32(uint32_t(rank)).u32(uint32_t(worldSize));
  auto answer = client->request(hello.body());
  if (!answer)
    return answer.status();
  return client;
}

StoreClient::~StoreClient() = default;

StatusOr<StoreClient::Answer> StoreClient::request(const std::string &body) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!brokenBecause_.empty())
    return Status::error(brokenBecause_);
  Deadline deadline = Clock::now() + options_.requestTimeout;
  std::string message = Writer().str(body).body();
  Status io = sendAll(fd_.get(), message.data(), message.size(), deadline);
  std::string reply;
  if (io) {
    std::string header(4, '\0');
    io = recvAll(fd_.get(), header.data(), 4, deadline);
    uint32_t size = 0;
    Reader(header).u32(size);
    if (io && size > kMaxMessage)
      io = Status::error("an answer of " + std::to_string(size) +
                         " bytes (not an octet store?)");
    if (io) {
      reply.resize(size);
      io = recvAll(fd_.get(), reply.data(), size, deadline);
    }
  }
  if (!io) {
    // Rank 0 leaves after a failure it announced: the notice is the cause.
    brokenBecause_ = !notice_.empty()
                         ? notice_
                         : "lost the connection to the store at " + address_ +
                               " (" + io.message() +
                               "): rank 0, which runs the store, is gone "
                               "(killed, crashed, or exited early)";
    fd_.reset();
    return Status::error(brokenBecause_);
  }
  Reader in(reply);
  uint8_t status = 0;
  Answer answer;
  if (!in.u8(status) || !in.str(answer.notice))
    return Status::error("malformed answer from the store at " + address_);
  if (notice_.empty())
    notice_ = answer.notice;
  if (status != 0) {
    std::string error;
    in.str(error);
    return Status::error(error);
  }
  answer.payload = reply.substr(1 + 4 + answer.notice.size());
  return answer;
}

Status StoreClient::set(const std::string &key, const std::string &value) {
  auto a = request(Writer().u8(uint8_t(Op::Set)).str(key).str(value).body());
  return a ? Status::ok() : a.status();
}

StatusOr<std::optional<std::string>> StoreClient::get(const std::string &key) {
  auto values = multiGet({key});
  if (!values)
    return values.status();
  return (*values)[0];
}

StatusOr<int64_t> StoreClient::add(const std::string &key, int64_t delta) {
  auto a = request(Writer().u8(uint8_t(Op::Add)).str(key).i64(delta).body());
  if (!a)
    return a.status();
  int64_t now = 0;
  if (!Reader(a->payload).i64(now))
    return Status::error("malformed answer from the store at " + address_);
  return now;
}

StatusOr<std::vector<std::optional<std::string>>>
StoreClient::multiGet(const std::vector<std::string> &keys) {
  return multiGet(keys, nullptr);
}

StatusOr<std::vector<std::optional<std::string>>>
StoreClient::multiGet(const std::vector<std::string> &keys,
                      std::string *notice) {
  Writer w;
  w.u8(uint8_t(Op::MultiGet)).u32(uint32_t(keys.size()));
  for (const std::string &k : keys)
    w.str(k);
  auto a = request(w.body());
  if (!a)
    return a.status();
  if (notice)
    *notice = a->notice;
  Reader in(a->payload);
  uint32_t n = 0;
  std::vector<std::optional<std::string>> values;
  if (!in.u32(n) || n != keys.size())
    return Status::error("malformed answer from the store at " + address_);
  for (uint32_t i = 0; i < n; ++i) {
    uint8_t found = 0;
    std::string value;
    if (!in.u8(found) || !in.str(value))
      return Status::error("malformed answer from the store at " + address_);
    values.push_back(found ? std::optional<std::string>(value) : std::nullopt);
  }
  return values;
}

StatusOr<std::vector<std::string>>
StoreClient::waitFor(const std::vector<std::string> &keys, Deadline deadline,
                     const MissingMessage &onTimeout) {
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    std::string notice;
    auto values = multiGet(keys, &notice);
    if (!values)
      return values.status();
    if (!notice.empty())
      return Status::error(notice);
    std::vector<size_t> missing;
    std::vector<std::string> found;
    for (size_t i = 0; i < values->size(); ++i) {
      if ((*values)[i])
        found.push_back(*(*values)[i]);
      else
        missing.push_back(i);
    }
    if (missing.empty())
      return found;
    if (Clock::now() >= deadline) {
      if (onTimeout)
        return Status::error(onTimeout(missing));
      std::string names;
      for (size_t i : missing)
        names += (names.empty() ? "" : ", ") + keys[i];
      return Status::error("timed out waiting for store keys " + names);
    }
    auto left = std::chrono::milliseconds(millisecondsUntil(deadline));
    std::this_thread::sleep_for(
        std::max(std::chrono::milliseconds(1), std::min(pause, left)));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

Status StoreClient::reportFailure(const std::string &message) {
  auto a = request(Writer().u8(uint8_t(Op::Fail)).str(message).body());
  return a ? Status::ok() : a.status();
}

StatusOr<std::string> StoreClient::failureNotice() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!notice_.empty())
      return notice_;
  }
  // Every answer carries the notice; an empty multi-get is the cheapest
  // request.
  std::string notice;
  auto values = multiGet({}, &notice);
  if (!values)
    return values.status();
  return notice;
}

Status StoreClient::leave() {
  auto a = request(Writer().u8(uint8_t(Op::Bye)).body());
  std::lock_guard<std::mutex> lock(mutex_);
  fd_.reset();
  brokenBecause_ = "rank " + std::to_string(rank_) + " has left the store";
  return a ? Status::ok() : a.status();
}

} // namespace octet::comm
