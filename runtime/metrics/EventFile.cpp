#include "runtime/metrics/EventFile.h"

#include "runtime/metrics/Crc32c.h"
#include "runtime/metrics/event.pb.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace octet::metrics {

namespace {

double nowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status makeDirectories(const std::string &dir) {
  std::string partial;
  std::stringstream parts(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/')
    partial = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty())
      continue;
    partial += part + "/";
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::error("cannot create directory '" + partial +
                           "': " + std::strerror(errno));
  }
  return Status::ok();
}

void putLe(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(char((v >> (8 * i)) & 0xFF));
}

uint64_t getLe(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}

} // namespace

StatusOr<std::unique_ptr<EventWriter>>
EventWriter::open(const std::string &dir) {
  if (Status st = makeDirectories(dir); !st)
    return st;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::unique_ptr<EventWriter> w(new EventWriter());
  w->path_ = dir + "/events.out.tfevents." +
             std::to_string(int64_t(nowSeconds())) + "." + host + "." +
             std::to_string(getpid());
  w->file_ = std::fopen(w->path_.c_str(), "wb");
  if (!w->file_)
    return Status::error("cannot create TensorBoard event file '" + w->path_ +
                         "': " + std::strerror(errno));
  Event first;
  first.set_wall_time(nowSeconds());
  first.set_file_version("brain.Event:2");
  if (Status st = w->writeRecord(first.SerializeAsString()); !st)
    return st;
  if (Status st = w->flush(); !st)
    return st;
  return w;
}

EventWriter::~EventWriter() {
  if (file_)
    std::fclose(file_);
}

Status EventWriter::writeRecord(const std::string &payload) {
  std::string record;
  putLe(record, payload.size(), 8);
  putLe(record, maskCrc(crc32c(record.data(), 8)), 4);
  record += payload;
  putLe(record, maskCrc(crc32c(payload.data(), payload.size())), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    return Status::error("writing TensorBoard event file '" + path_ +
                         "' failed: " + std::strerror(errno));
  return Status::ok();
}

Status EventWriter::scalars(
    int64_t step, const std::vector<std::pair<std::string, double>> &values) {
  Event e;
  e.set_wall_time(nowSeconds());
  e.set_step(step);
  Summary *summary = e.mutable_summary();
  for (const auto &[tag, value] : values) {
    SummaryValue *v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(float(value));
  }
  return writeRecord(e.SerializeAsString());
}

Status EventWriter::flush() {
  if (std::fflush(file_) != 0)
    return Status::error("flushing TensorBoard event file '" + path_ +
                         "' failed: " + std::strerror(errno));
  return Status::ok();
}

StatusOr<EventFileContents> readEventFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open event file '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string bytes = buf.str();
  const auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
  EventFileContents out;
  size_t at = 0;
  for (int record = 0; at < bytes.size(); ++record) {
    std::string where = path + ": record " + std::to_string(record) +
                        " at byte " + std::to_string(at);
    if (bytes.size() - at < 12)
      return Status::error(where + " is cut short (header)");
    uint64_t length = getLe(p + at, 8);
    if (uint32_t(getLe(p + at + 8, 4)) != maskCrc(crc32c(p + at, 8)))
      return Status::error(where + ": the length's CRC does not match");
    if (bytes.size() - at - 12 < length + 4)
      return Status::error(where + " is cut short (" + std::to_string(length) +
                           " bytes of data announced)");
    const unsigned char *data = p + at + 12;
    if (uint32_t(getLe(data + length, 4)) != maskCrc(crc32c(data, length)))
      return Status::error(where + ": the data's CRC does not match");
    Event e;
    if (!e.ParseFromArray(data, int(length)))
      return Status::error(where + " is not an Event");
    if (e.what_case() == Event::kFileVersion)
      out.fileVersion = e.file_version();
    else if (e.what_case() == Event::kSummary)
      for (const SummaryValue &v : e.summary().value())
        out.scalars.push_back(
            {e.step(), e.wall_time(), v.tag(), v.simple_value()});
    at += 12 + length + 4;
  }
  return out;
}

} // namespace octet::metrics
