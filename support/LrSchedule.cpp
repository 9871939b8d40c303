#include "support/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace octet {

double learningRateAt(const LrSchedule &schedule, int64_t step) {
  double lr = schedule.lr;
  double s = double(step);
  double warmup = double(std::max<int64_t>(0, schedule.warmupSteps));
  double total = double(schedule.totalSteps);
  double ratio = schedule.minLrRatio;
  if (warmup > 0 && s <= warmup)
    return lr * s / warmup;
  double progress =
      std::clamp((s - warmup) / std::max(1.0, total - warmup), 0.0, 1.0);
  return lr * (ratio + (1 - ratio) * 0.5 * (1 + std::cos(M_PI * progress)));
}

} // namespace octet
