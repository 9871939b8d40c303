#ifndef OCTET_SUPPORT_ATOMICFILE_H
#define OCTET_SUPPORT_ATOMICFILE_H

#include "support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace octet {

// Writes a file so that readers see either the old file or the complete new
// one: data goes to a temporary file in the same directory, which commit()
// fsyncs and renames over the target. A writer destroyed before commit()
// removes its temporary file, so a failure leaves nothing half-written.
class AtomicFileWriter {
public:
  static StatusOr<AtomicFileWriter> create(const std::string &path);
  AtomicFileWriter(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter &operator=(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;
  ~AtomicFileWriter();

  Status write(const void *data, size_t size);
  Status write(std::string_view bytes) {
    return write(bytes.data(), bytes.size());
  }
  // Flushes, fsyncs, renames onto the target and fsyncs the directory.
  Status commit();

  const std::string &path() const { return path_; }
  uint64_t bytesWritten() const { return bytesWritten_; }

private:
  AtomicFileWriter() = default;
  Status flushBuffer();
  void abandon();

  std::string path_, tempPath_;
  int fd_ = -1;
  std::vector<char> buffer_;
  uint64_t bytesWritten_ = 0;
};

// Replaces `path` with `contents` atomically.
Status writeFileAtomically(const std::string &path, std::string_view contents);

// Reads a whole file.
StatusOr<std::string> readWholeFile(const std::string &path);

// Whether `path` names a directory, or a regular file (links followed).
bool isDirectory(const std::string &path);
bool isRegularFile(const std::string &path);

// A read-only memory map of a whole file (empty files map to nothing).
class MappedFile {
public:
  static StatusOr<MappedFile> open(const std::string &path);
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const uint8_t *data() const { return data_; }
  uint64_t size() const { return size_; }

private:
  MappedFile() = default;
  const uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace octet

#endif
