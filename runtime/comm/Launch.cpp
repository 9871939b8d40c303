#include "runtime/comm/Launch.h"

#include "runtime/comm/Socket.h"
#include "runtime/comm/Watchdog.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace octet::comm {

namespace {

// A line longer than this is passed on in pieces.
constexpr size_t kMaxLine = 64 << 10;

// The signal handler's end of the self-pipe (one launch at a time).
std::atomic<int> signalPipe{-1};
std::atomic<bool> launching{false};

void onSignal(int signal) {
  int fd = signalPipe.load();
  if (fd >= 0) {
    unsigned char byte = (unsigned char)signal;
    int saved = errno;
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);
    errno = saved;
  }
}

struct OutputStream {
  Fd fd;
  std::string partial;
  std::string lastLine;
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  OutputStream out, err;
  bool exited = false;
  int status = 0;
};

StatusOr<std::string> findProgram(const std::string &name) {
  auto runnable = [](const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.empty())
    return Status::error("no command to launch: give it after '--'");
  if (name.find('/') != std::string::npos) {
    if (runnable(name))
      return name;
    return Status::error("'" + name + "' is not an executable file");
  }
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos)
      end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(candidate))
      return candidate;
    start = end + 1;
  }
  return Status::error("'" + name + "' is not a program on PATH");
}

// The launcher's environment with the caller's and the rank's variables
// set over it.
std::vector<std::string> rankEnvironment(const LaunchOptions &options, int rank,
                                         int port) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  auto set = [&](const std::string &key, const std::string &value) {
    if (!vars.count(key))
      order.push_back(key);
    vars[key] = value;
  };
  for (char **e = environ; e && *e; ++e) {
    std::string entry = *e;
    size_t eq = entry.find('=');
    if (eq != std::string::npos)
      set(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (const auto &[key, value] : options.env)
    set(key, value);
  set("RANK", std::to_string(rank));
  set("LOCAL_RANK", std::to_string(rank));
  set("WORLD_SIZE", std::to_string(options.ranks));
  set("LOCAL_WORLD_SIZE", std::to_string(options.ranks));
  set("MASTER_ADDR", options.masterAddr);
  set("MASTER_PORT", std::to_string(port));
  // NVLink multicast (NVLS) stays off on the GPU host, always.
  set("NCCL_NVLS_ENABLE", "0");
  std::vector<std::string> out;
  for (const std::string &key : order)
    out.push_back(key + "=" + vars[key]);
  return out;
}

std::vector<char *> pointers(std::vector<std::string> &strings) {
  std::vector<char *> p;
  for (std::string &s : strings)
    p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

StatusOr<pid_t> spawn(const std::string &program, std::vector<std::string> argv,
                      std::vector<std::string> envp, int devNull, Fd &outRead,
                      Fd &errRead) {
  int outPipe[2], errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0)
    return Status::error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    ::close(outPipe[0]), ::close(outPipe[1]);
    return Status::error(std::string("pipe: ") + std::strerror(errno));
  }
  // Everything the child touches is built before fork(): between fork and
  // exec only async-signal-safe calls.
  std::vector<char *> args = pointers(argv), env = pointers(envp);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1]})
      ::close(fd);
    return Status::error(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Its own process group, so that terminating a rank reaches whatever
    // it started; and it dies with the launcher.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE})
      ::sigaction(s, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(devNull, 0);
    ::dup2(outPipe[1], 1);
    ::dup2(errPipe[1], 2);
    ::execve(program.c_str(), args.data(), env.data());
    const char msg[] = "octet launch: exec failed\n";
    [[maybe_unused]] ssize_t n = ::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  outRead = Fd(outPipe[0]);
  errRead = Fd(errPipe[0]);
  setNonBlocking(outRead.get());
  setNonBlocking(errRead.get());
  return pid;
}

// How long a rank its watchdog ended waits to be named the cause, in case
// the rank it lost has not been reaped yet.
constexpr std::chrono::seconds kCauseWindow{2};

class Launcher {
public:
  explicit Launcher(const LaunchOptions &options) : options_(options) {}
  StatusOr<LaunchResult> run();

private:
  void emit(bool toStderr, const std::string &line) const {
    options_.output(toStderr, line);
  }
  void readFrom(Rank &r, OutputStream &s, bool toStderr, bool toEnd);
  void reap();
  void signalAll(int signal);
  std::string describeExit(const Rank &r) const;

  const LaunchOptions &options_;
  std::vector<Rank> ranks_;
  LaunchResult result_;
  bool terminated_ = false, killed_ = false, interrupted_ = false;
  Deadline terminateAt_ = Deadline::max(), killAt_ = Deadline::max();
  // A rank its watchdog ended, while the rank whose loss it reports may
  // not have been reaped yet: the cause until kCauseWindow has passed or
  // every rank has exited.
  const Rank *consequenceSeen_ = nullptr;
  Deadline causeBy_ = Deadline::max();
};

void Launcher::readFrom(Rank &r, OutputStream &s, bool toStderr, bool toEnd) {
  if (!s.fd.valid())
    return;
  std::string prefix = "[rank " + std::to_string(r.rank) + "] ";
  char buffer[16 << 10];
  IoOutcome outcome = IoOutcome::Moved;
  while (outcome == IoOutcome::Moved || outcome == IoOutcome::Again) {
    ssize_t n = ::read(s.fd.get(), buffer, sizeof(buffer));
    outcome = ioOutcome(n);
    if (outcome != IoOutcome::Moved)
      continue;
    s.partial.append(buffer, size_t(n));
    size_t start = 0, newline;
    while ((newline = s.partial.find('\n', start)) != std::string::npos) {
      std::string line = s.partial.substr(start, newline - start);
      if (!line.empty())
        s.lastLine = line;
      emit(toStderr, prefix + line);
      start = newline + 1;
    }
    s.partial.erase(0, start);
    if (s.partial.size() > kMaxLine) {
      emit(toStderr, prefix + s.partial);
      s.partial.clear();
    }
  }
  if (outcome == IoOutcome::Later && !toEnd)
    return;
  // The end of its output, or all there is of a rank that has exited (a
  // process it left behind may hold the pipe open).
  if (!s.partial.empty()) {
    s.lastLine = s.partial;
    emit(toStderr, prefix + s.partial);
    s.partial.clear();
  }
  s.fd.reset();
}

std::string Launcher::describeExit(const Rank &r) const {
  std::string how =
      WIFSIGNALED(r.status)
          ? "was killed by signal " + std::to_string(WTERMSIG(r.status)) +
                " (" + ::strsignal(WTERMSIG(r.status)) + ")"
          : "exited with status " + std::to_string(WEXITSTATUS(r.status));
  std::string last = !r.err.lastLine.empty() ? r.err.lastLine : r.out.lastLine;
  return "rank " + std::to_string(r.rank) + " " + how +
         (last.empty() ? "" : ": " + last);
}

void Launcher::reap() {
  // Ranks may be reaped in any order, and a rank the watchdog ended
  // (kWatchdogExitCode) is a consequence: it may even be reaped a round
  // before the rank it reports lost. Another failure, in the same round or
  // within kCauseWindow, is the cause.
  Rank *first = nullptr;
  auto consequence = [](const Rank &r) {
    return WIFEXITED(r.status) && WEXITSTATUS(r.status) == kWatchdogExitCode;
  };
  for (Rank &r : ranks_) {
    if (r.exited)
      continue;
    int status = 0;
    if (::waitpid(r.pid, &status, WNOHANG) != r.pid)
      continue;
    r.exited = true;
    r.status = status;
    readFrom(r, r.out, false, /*toEnd=*/true);
    readFrom(r, r.err, true, /*toEnd=*/true);
    bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (failed && (!first || (consequence(*first) && !consequence(r))))
      first = &r;
  }
  if (result_.failedRank >= 0 || interrupted_)
    return;
  if (first && consequence(*first) && !consequenceSeen_) {
    consequenceSeen_ = first;
    causeBy_ = Clock::now() + kCauseWindow;
    if (!terminated_)
      terminateAt_ = std::min(terminateAt_, Clock::now() + options_.grace);
  }
  bool allExited = std::all_of(ranks_.begin(), ranks_.end(),
                               [](const Rank &r) { return r.exited; });
  const Rank *cause = first && !consequence(*first) ? first : nullptr;
  if (!cause && consequenceSeen_ && (allExited || Clock::now() >= causeBy_))
    cause = consequenceSeen_;
  if (!cause)
    return;
  result_.failedRank = cause->rank;
  result_.failure = describeExit(*cause);
  result_.exitCode = WIFSIGNALED(cause->status) ? 128 + WTERMSIG(cause->status)
                                                : WEXITSTATUS(cause->status);
  if (!terminated_)
    terminateAt_ = std::min(terminateAt_, Clock::now() + options_.grace);
}

void Launcher::signalAll(int signal) {
  for (const Rank &r : ranks_)
    if (!r.exited)
      ::kill(-r.pid, signal);
}

StatusOr<LaunchResult> Launcher::run() {
  auto program = findProgram(options_.command.front());
  if (!program)
    return program.status();
  int port = options_.port;
  {
    // A free port now (port 0), or proof that the one asked for is free.
    auto probe = listenTcp(options_.masterAddr, options_.port, &port, "--port");
    if (!probe)
      return probe.status();
  }
  Fd devNull(::open("/dev/null", O_RDONLY | O_CLOEXEC));

  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::error(std::string("pipe: ") + std::strerror(errno));
  Fd signalRead(pipeFds[0]), signalWrite(pipeFds[1]);
  signalPipe = signalWrite.get();
  // The signals the launcher handles while it runs (its own SIGINT and
  // SIGTERM stop the ranks; SIGCHLD wakes its loop), restored after.
  const int handled[] = {SIGCHLD, SIGINT, SIGTERM};
  struct sigaction handler, previous[3];
  std::memset(&handler, 0, sizeof(handler));
  handler.sa_handler = onSignal;
  handler.sa_flags = SA_RESTART;
  sigemptyset(&handler.sa_mask);
  for (int i = 0; i < 3; ++i)
    ::sigaction(handled[i], &handler, &previous[i]);

  Status spawned = Status::ok();
  for (int rank = 0; rank < options_.ranks && spawned; ++rank) {
    Rank r;
    r.rank = rank;
    auto pid =
        spawn(*program, options_.command, rankEnvironment(options_, rank, port),
              devNull.get(), r.out.fd, r.err.fd);
    if (!pid) {
      spawned = pid.status();
      break;
    }
    r.pid = *pid;
    ranks_.push_back(std::move(r));
  }
  if (!spawned) {
    // The ranks already started would wait for the missing one.
    signalAll(SIGKILL);
    terminated_ = killed_ = true;
  }

  std::vector<pollfd> fds;
  std::vector<std::pair<Rank *, bool>> owners;
  while (std::any_of(ranks_.begin(), ranks_.end(),
                     [](const Rank &r) { return !r.exited; })) {
    fds.assign(1, pollfd{signalRead.get(), POLLIN, 0});
    owners.assign(1, {nullptr, false});
    for (Rank &r : ranks_) {
      if (r.out.fd.valid()) {
        fds.push_back({r.out.fd.get(), POLLIN, 0});
        owners.push_back({&r, false});
      }
      if (r.err.fd.valid()) {
        fds.push_back({r.err.fd.get(), POLLIN, 0});
        owners.push_back({&r, true});
      }
    }
    Deadline next = std::min(
        {terminateAt_, killAt_, Clock::now() + std::chrono::milliseconds(200)});
    ::poll(fds.data(), fds.size(), millisecondsUntil(next));
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) {
        Rank &r = *owners[i].first;
        readFrom(r, owners[i].second ? r.err : r.out, owners[i].second,
                 /*toEnd=*/false);
      }
    unsigned char signal = 0;
    while (::read(signalRead.get(), &signal, 1) == 1) {
      if (signal != SIGINT && signal != SIGTERM)
        continue;
      if (terminated_) {
        // Asked twice: no more waiting.
        killAt_ = Clock::now();
        continue;
      }
      emit(true, std::string("octet launch: ") + ::strsignal(signal) +
                     ": stopping every rank");
      if (result_.failedRank < 0) {
        // The ranks end because they were told to: none of them failed.
        interrupted_ = true;
        result_.exitCode = 128 + signal;
      }
      terminateAt_ = Clock::now();
    }
    reap();
    if (!terminated_ && Clock::now() >= terminateAt_) {
      terminated_ = true;
      std::string left;
      for (const Rank &r : ranks_)
        if (!r.exited)
          left += (left.empty() ? "" : ", ") + std::to_string(r.rank);
      if (!left.empty()) {
        emit(true, "octet launch: terminating rank(s) " + left);
        signalAll(SIGTERM);
      }
      killAt_ = Clock::now() + options_.killAfter;
    }
    if (!killed_ && Clock::now() >= killAt_) {
      killed_ = true;
      signalAll(SIGKILL);
    }
  }

  for (int i = 0; i < 3; ++i)
    ::sigaction(handled[i], &previous[i], nullptr);
  signalPipe = -1;
  if (!spawned)
    return spawned;
  if (result_.failedRank >= 0)
    emit(true, "octet launch: " + result_.failure);
  return result_;
}

void writeLine(bool toStderr, const std::string &line) {
  std::string text = line + "\n";
  int fd = toStderr ? 2 : 1;
  const char *p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    p += n;
    left -= size_t(n);
  }
}

} // namespace

StatusOr<LaunchResult> launchRanks(const LaunchOptions &options) {
  if (options.ranks < 1)
    return Status::error("--gpus " + std::to_string(options.ranks) +
                         ": launch at least one rank");
  if (options.command.empty())
    return Status::error("no command to launch: give it after '--'");
  if (launching.exchange(true))
    return Status::error("a launch is already running in this process");
  LaunchOptions withOutput = options;
  if (!withOutput.output)
    withOutput.output = writeLine;
  auto result = Launcher(withOutput).run();
  launching = false;
  return result;
}

} // namespace octet::comm
