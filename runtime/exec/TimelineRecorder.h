#ifndef OCTET_RUNTIME_EXEC_TIMELINERECORDER_H
#define OCTET_RUNTIME_EXEC_TIMELINERECORDER_H

// The CUDA side of octet-run --timeline (runtime/exec/StepTimeline.h): the
// runtime marks the streams with events around every step of the programs
// it runs between begin() and end(), and adds a record per interval between
// two marks; end() reads every mark against the first, time zero. Nothing
// is recorded outside those calls, so the other steps of a run carry no
// events. The events are created ahead (reserve) and reused from step to
// step, so that a recorded step spends no host time creating them.

#include "runtime/core/CudaCheck.h"
#include "runtime/exec/StepTimeline.h"

#include <string>
#include <vector>

namespace octet {

class TimelineRecorder {
public:
  TimelineRecorder() = default;
  TimelineRecorder(const TimelineRecorder &) = delete;
  TimelineRecorder &operator=(const TimelineRecorder &) = delete;
  ~TimelineRecorder();

  // Creates events until `events` are at hand.
  Status reserve(size_t events);
  // Starts a step: the last step's records are dropped, and the next mark
  // is time zero.
  Status begin();
  bool recording() const { return recording_; }
  // Records the next event on `stream`; `index` is its index, for add.
  Status mark(CUstream stream, int &index);
  // A program run, on the compute stream: its start (the step's first is
  // time zero; the records added from now on are the run's), the start of
  // its join of the communication streams (where it has some), and its
  // end, which adds the join's wait and the run's own record.
  Status beginProgram(CUstream main, bundle::ProgramKind kind,
                      const std::string &name);
  Status beginJoin(CUstream main);
  Status endProgram(CUstream main);
  // `record` lies between two marks (its times and run are filled in).
  void add(int beginMark, int endMark, TimelineRecord record);
  // Stops recording and reads the times; every mark must have completed
  // (the caller synchronized).
  Status end();
  // The last ended step's records, in the order they were added.
  const std::vector<TimelineRecord> &records() const { return records_; }
  // Events marked in the last step (for reserve's estimate to be checked).
  size_t marksUsed() const { return used_; }

private:
  std::vector<CUevent> events_;
  size_t used_ = 0;
  int runs_ = 0, run_ = 0;
  // The program run being recorded: its first mark, its join's (-1:
  // none), its kind and name.
  int programBegin_ = -1, joinBegin_ = -1;
  bundle::ProgramKind program_ = bundle::ProgramKind();
  std::string programName_;
  bool recording_ = false;
  std::vector<TimelineRecord> records_;
  std::vector<std::pair<int, int>> marks_;
};

} // namespace octet

#endif
