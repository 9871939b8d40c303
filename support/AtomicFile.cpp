#include "support/AtomicFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace octet {

namespace {

constexpr size_t kBufferSize = 1 << 20;

std::string systemError() { return std::strerror(errno); }

std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

bool isDirectory(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool isRegularFile(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

StatusOr<AtomicFileWriter> AtomicFileWriter::create(const std::string &path) {
  AtomicFileWriter writer;
  writer.path_ = path;
  std::string pattern = path + ".tmp-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  writer.fd_ = mkstemp(name.data());
  if (writer.fd_ < 0)
    return Status::error("cannot create a file next to " + path + ": " +
                         systemError() +
                         "; check that the directory exists and is writable");
  writer.tempPath_ = name.data();
  // mkstemp creates the file 0600; give it the usual permissions.
  mode_t mask = umask(0);
  umask(mask);
  (void)fchmod(writer.fd_, 0666 & ~mask);
  writer.buffer_.reserve(kBufferSize);
  return writer;
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter &&other) noexcept {
  *this = std::move(other);
}

AtomicFileWriter &
AtomicFileWriter::operator=(AtomicFileWriter &&other) noexcept {
  if (this != &other) {
    abandon();
    path_ = std::move(other.path_);
    tempPath_ = std::move(other.tempPath_);
    fd_ = other.fd_;
    buffer_ = std::move(other.buffer_);
    bytesWritten_ = other.bytesWritten_;
    other.fd_ = -1;
    other.tempPath_.clear();
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::abandon() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  if (!tempPath_.empty())
    ::unlink(tempPath_.c_str());
  tempPath_.clear();
}

Status AtomicFileWriter::flushBuffer() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Status::error("cannot write " + path_ + ": " + systemError());
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return Status::ok();
}

Status AtomicFileWriter::write(const void *data, size_t size) {
  if (fd_ < 0)
    return Status::error("write to " + path_ + " after it was committed");
  const char *bytes = static_cast<const char *>(data);
  bytesWritten_ += size;
  while (size > 0) {
    size_t room = kBufferSize - buffer_.size();
    size_t chunk = size < room ? size : room;
    buffer_.insert(buffer_.end(), bytes, bytes + chunk);
    bytes += chunk;
    size -= chunk;
    if (buffer_.size() == kBufferSize)
      if (Status s = flushBuffer(); !s)
        return s;
  }
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0)
    return Status::error("commit of " + path_ + " after it was committed");
  if (Status s = flushBuffer(); !s)
    return s;
  if (::fsync(fd_) != 0)
    return Status::error("cannot flush " + path_ +
                         " to disk: " + systemError());
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    return Status::error("cannot close " + path_ + ": " + systemError());
  if (::rename(tempPath_.c_str(), path_.c_str()) != 0)
    return Status::error("cannot rename " + tempPath_ + " to " + path_ + ": " +
                         systemError());
  tempPath_.clear();
  // The rename itself is durable only once the directory is synced.
  int dir = ::open(directoryOf(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return Status::ok();
}

Status writeFileAtomically(const std::string &path, std::string_view contents) {
  StatusOr<AtomicFileWriter> writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.status();
  if (Status s = writer->write(contents); !s)
    return s;
  return writer->commit();
}

StatusOr<std::string> readWholeFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error("cannot open " + path + ": " + systemError());
  std::string contents;
  char chunk[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      std::string message = "cannot read " + path + ": " + systemError();
      ::close(fd);
      return Status::error(message);
    }
    if (n == 0)
      break;
    contents.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

StatusOr<MappedFile> MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error("cannot open " + path + ": " + systemError());
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::error(path + " is not a regular file");
  }
  MappedFile file;
  file.size_ = static_cast<uint64_t>(info.st_size);
  if (file.size_ > 0) {
    void *data = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      std::string message = "cannot map " + path + ": " + systemError();
      ::close(fd);
      return Status::error(message);
    }
    file.data_ = static_cast<const uint8_t *>(data);
  }
  ::close(fd);
  return file;
}

MappedFile::MappedFile(MappedFile &&other) noexcept {
  *this = std::move(other);
}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    if (data_)
      ::munmap(const_cast<uint8_t *>(data_), size_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), size_);
}

} // namespace octet
