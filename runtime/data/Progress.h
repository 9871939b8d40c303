#ifndef OCTET_RUNTIME_DATA_PROGRESS_H
#define OCTET_RUNTIME_DATA_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace octet::data {

// A one-line progress display for long work: rewritten in place on a
// terminal, a plain line every few seconds otherwise (logs, CI).
class ProgressDisplay {
public:
  // `total` is in bytes; 0 when unknown.
  ProgressDisplay(std::string label, uint64_t total, FILE *out = stderr);
  // Redraws when enough time has passed since the last draw.
  void update(uint64_t done, uint64_t items, uint64_t tokens);
  // Draws the final state and ends the line.
  void finish(uint64_t done, uint64_t items, uint64_t tokens);

  // The text of one display line, for tests.
  std::string line(uint64_t done, uint64_t items, uint64_t tokens) const;

private:
  void draw(uint64_t done, uint64_t items, uint64_t tokens, bool final);

  std::string label_;
  uint64_t total_;
  FILE *out_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, lastDraw_;
  size_t lastWidth_ = 0;
};

} // namespace octet::data

#endif
