#include "runtime/exec/TimelineRecorder.h"

namespace octet {

TimelineRecorder::~TimelineRecorder() {
  for (CUevent e : events_)
    cuEventDestroy(e);
}

Status TimelineRecorder::reserve(size_t events) {
  while (events_.size() < events) {
    CUevent e = nullptr;
    OCTET_CHECK_CUDA(cuEventCreate(&e, CU_EVENT_DEFAULT));
    events_.push_back(e);
  }
  return Status::ok();
}

Status TimelineRecorder::begin() {
  if (recording_)
    return Status::error("the step timeline is already recording a step");
  recording_ = true;
  used_ = 0;
  runs_ = 0, run_ = 0;
  records_.clear();
  marks_.clear();
  return Status::ok();
}

Status TimelineRecorder::mark(CUstream stream, int &index) {
  // More events than reserve's estimate: created here, kept for the next
  // recorded step.
  if (used_ == events_.size())
    OCTET_RETURN_IF_ERROR(reserve(events_.size() + 64));
  OCTET_CHECK_CUDA(cuEventRecord(events_[used_], stream));
  index = int(used_++);
  return Status::ok();
}

Status TimelineRecorder::beginProgram(CUstream main, bundle::ProgramKind kind,
                                      const std::string &name) {
  run_ = runs_++;
  program_ = kind;
  programName_ = name;
  joinBegin_ = -1;
  return mark(main, programBegin_);
}

Status TimelineRecorder::beginJoin(CUstream main) {
  return mark(main, joinBegin_);
}

Status TimelineRecorder::endProgram(CUstream main) {
  int end = -1;
  OCTET_RETURN_IF_ERROR(mark(main, end));
  TimelineRecord r;
  r.program = program_;
  if (joinBegin_ >= 0) {
    r.kind = TimelineKind::Wait;
    r.label = "join the communication streams";
    add(joinBegin_, end, r);
  }
  r.kind = TimelineKind::Program;
  r.label = programName_;
  add(programBegin_, end, std::move(r));
  return Status::ok();
}

void TimelineRecorder::add(int beginMark, int endMark, TimelineRecord record) {
  record.run = run_;
  records_.push_back(std::move(record));
  marks_.push_back({beginMark, endMark});
}

Status TimelineRecorder::end() {
  if (!recording_)
    return Status::error("the step timeline was not recording");
  recording_ = false;
  for (size_t i = 0; i < records_.size(); ++i) {
    float begin = 0, end = 0;
    OCTET_CHECK_CUDA(
        cuEventElapsedTime(&begin, events_[0], events_[size_t(marks_[i].first)]));
    OCTET_CHECK_CUDA(
        cuEventElapsedTime(&end, events_[0], events_[size_t(marks_[i].second)]));
    records_[i].beginMs = double(begin);
    records_[i].endMs = double(end);
  }
  return Status::ok();
}

} // namespace octet
