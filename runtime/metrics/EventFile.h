#ifndef OCTET_RUNTIME_METRICS_EVENTFILE_H
#define OCTET_RUNTIME_METRICS_EVENTFILE_H

// TensorBoard event files: a TFRecord stream of Event protos. Each record is
//   uint64 length, uint32 masked CRC-32C of those 8 bytes,
//   `length` bytes of Event, uint32 masked CRC-32C of them
// (little-endian). The first record holds file_version "brain.Event:2";
// the rest hold scalar summaries. TensorBoard reads every file named
// events.out.tfevents.* in a directory.

#include "support/Status.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace octet::metrics {

class EventWriter {
public:
  // Creates DIR (and its parents) and a new events.out.tfevents.<seconds>.
  // <host>.<pid> file in it.
  static StatusOr<std::unique_ptr<EventWriter>> open(const std::string &dir);
  ~EventWriter();
  EventWriter(const EventWriter &) = delete;
  EventWriter &operator=(const EventWriter &) = delete;

  // One event holding every (tag, value) pair at `step`.
  Status scalars(int64_t step,
                 const std::vector<std::pair<std::string, double>> &values);
  // Pushes buffered records to the file, so a crash loses at most the
  // records since the last flush (the trainer flushes every step).
  Status flush();
  const std::string &path() const { return path_; }

private:
  EventWriter() = default;
  Status writeRecord(const std::string &payload);
  std::string path_;
  std::FILE *file_ = nullptr;
};

// One scalar as read back from an event file.
struct ScalarEvent {
  int64_t step = 0;
  double wallTime = 0;
  std::string tag;
  float value = 0;
};

struct EventFileContents {
  std::string fileVersion;
  std::vector<ScalarEvent> scalars;
};

// Reads an event file, checking both CRCs of every record; an error names
// the record and what is wrong with it.
StatusOr<EventFileContents> readEventFile(const std::string &path);

} // namespace octet::metrics

#endif
