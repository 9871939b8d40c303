#include "runtime/data/Progress.h"

#include <unistd.h>

namespace octet::data {

namespace {

std::string humanCount(double value) {
  const char *units[] = {"", "k", "M", "G", "T"};
  int unit = 0;
  while (value >= 1000 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), unit ? "%.1f%s" : "%.0f%s", value,
                units[unit]);
  return buffer;
}

} // namespace

ProgressDisplay::ProgressDisplay(std::string label, uint64_t total, FILE *out)
    : label_(std::move(label)), total_(total), out_(out),
      terminal_(out && isatty(fileno(out))),
      start_(std::chrono::steady_clock::now()), lastDraw_(start_) {}

std::string ProgressDisplay::line(uint64_t done, uint64_t items,
                                  uint64_t tokens) const {
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
  char buffer[256];
  std::string percent;
  if (total_ > 0) {
    std::snprintf(buffer, sizeof(buffer), "%5.1f%% ",
                  100.0 * static_cast<double>(done) / total_);
    percent = buffer;
  }
  double mbPerSecond = seconds > 0 ? done / seconds / 1e6 : 0;
  std::string eta;
  if (total_ > 0 && done > 0 && done < total_ && seconds > 0.5) {
    double remaining = seconds * (static_cast<double>(total_) - done) / done;
    std::snprintf(buffer, sizeof(buffer), ", ~%.0fs left", remaining);
    eta = buffer;
  }
  std::snprintf(buffer, sizeof(buffer),
                "%s: %s%s lines, %s tokens, %.1f MB/s%s", label_.c_str(),
                percent.c_str(), humanCount(items).c_str(),
                humanCount(tokens).c_str(), mbPerSecond, eta.c_str());
  return buffer;
}

void ProgressDisplay::draw(uint64_t done, uint64_t items, uint64_t tokens,
                           bool final) {
  if (!out_)
    return;
  std::string text = line(done, items, tokens);
  if (terminal_) {
    size_t width = text.size();
    if (width < lastWidth_)
      text.append(lastWidth_ - width, ' ');
    lastWidth_ = width;
    std::fprintf(out_, "\r%s%s", text.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressDisplay::update(uint64_t done, uint64_t items, uint64_t tokens) {
  auto now = std::chrono::steady_clock::now();
  auto interval = terminal_ ? std::chrono::milliseconds(200)
                            : std::chrono::milliseconds(5000);
  if (now - lastDraw_ < interval)
    return;
  lastDraw_ = now;
  draw(done, items, tokens, false);
}

void ProgressDisplay::finish(uint64_t done, uint64_t items, uint64_t tokens) {
  draw(done, items, tokens, true);
}

} // namespace octet::data
