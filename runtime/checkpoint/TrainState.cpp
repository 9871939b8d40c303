#include "runtime/checkpoint/TrainState.h"

#include "support/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

namespace octet::checkpoint {

namespace {

constexpr const char *kStateFile = "train_state.safetensors";
constexpr const char *kTrainerFile = "trainer.json";
constexpr const char *kLatestFile = "latest";
constexpr int kTrainerFormat = 1;

int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  return ::remove(path);
}

void removeTree(const std::string &path) {
  if (isDirectory(path))
    nftw(path.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
}

Status makeDir(const std::string &path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::error("cannot create checkpoint directory '" + path +
                         "': " + std::strerror(errno));
  return Status::ok();
}

void syncDir(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
}

std::string stepName(int64_t step) { return "step-" + std::to_string(step); }

// Steps of the step-N directories in DIR, ascending: the complete ones
// (holding a trainer.json), or with `complete` false the others.
std::vector<int64_t> stepDirectories(const std::string &dir, bool complete) {
  std::vector<int64_t> steps;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return steps;
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("step-", 0) != 0)
      continue;
    char *end = nullptr;
    long long step = std::strtoll(name.c_str() + 5, &end, 10);
    if (*end || end == name.c_str() + 5)
      continue;
    if (isRegularFile(dir + "/" + name + "/" + kTrainerFile) == complete &&
        isDirectory(dir + "/" + name))
      steps.push_back(step);
  }
  closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<int64_t> completeSteps(const std::string &dir) {
  return stepDirectories(dir, true);
}

// Removes a checkpoint that pruning drops. Its trainer.json, which makes
// it count as complete, goes first and that removal reaches the disk before
// anything else is removed: a kill part way through leaves a directory no
// scan for the latest checkpoint picks up (the next save's pruning removes
// it).
void removeCheckpoint(const std::string &stepDir,
                      const std::function<void(const std::string &)> &removed) {
  std::string marker = stepDir + "/" + kTrainerFile;
  if (::unlink(marker.c_str()) == 0) {
    syncDir(stepDir);
    if (removed)
      removed(marker);
  }
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(stepDir, ec)) {
    std::filesystem::remove_all(entry.path(), ec);
    if (removed)
      removed(entry.path().string());
  }
  std::filesystem::remove(stepDir, ec);
  if (removed)
    removed(stepDir);
}

Status writeState(const std::string &path,
                  const std::vector<hf::NamedTensor> &tensors) {
  hf::SafetensorsWriter writer;
  for (const hf::NamedTensor &t : tensors)
    if (Status st = writer.addView(t.name, t.dtype, t.shape, t.data.data(),
                                   t.data.size());
        !st)
      return st;
  writer.setMetadata("format", "octet-train-state");
  return writer.write(path);
}

} // namespace

StatusOr<std::string> saveTrainCheckpoint(const std::string &dir,
                                          const TrainCheckpoint &ckpt,
                                          const SaveOptions &options) {
  if (Status st = makeDir(dir); !st)
    return st;
  const std::string name = stepName(ckpt.step);
  const std::string final = dir + "/" + name;
  const std::string partial = dir + "/." + name + ".partial";
  removeTree(partial);
  if (Status st = makeDir(partial); !st)
    return st;
  auto written = [&](const std::string &file) -> Status {
    return options.afterFile ? options.afterFile(file) : Status::ok();
  };
  auto fail = [&](const Status &st) -> Status {
    removeTree(partial);
    std::string kept = "no earlier checkpoint";
    if (std::string latest = latestTrainCheckpoint(dir); !latest.empty())
      kept = "the last good checkpoint " + latest + " is intact";
    return Status::error("saving checkpoint " + final + " failed (" + kept +
                         "): " + st.message());
  };

  Status st = hf::writeCheckpoint(partial, ckpt.model);
  if (st)
    st = written(partial + "/model.safetensors");
  if (st)
    st = writeState(partial + "/" + kStateFile, ckpt.state);
  if (st)
    st = written(partial + "/" + kStateFile);
  if (st) {
    nlohmann::json j;
    j["format"] = kTrainerFormat;
    j["step"] = ckpt.step;
    j["data_position"] = ckpt.dataPosition;
    j["seed"] = ckpt.seed;
    j["bundle_hash"] = ckpt.bundleHash;
    if (ckpt.loss)
      j["loss"] = *ckpt.loss;
    st = writeFileAtomically(partial + "/" + kTrainerFile, j.dump(2) + "\n");
  }
  if (st)
    st = written(partial + "/" + kTrainerFile);
  if (!st)
    return fail(st);
  syncDir(partial);

  // A checkpoint of the same step (a rerun after resuming from an earlier
  // one) is replaced only once the new one is complete.
  const std::string previous = dir + "/." + name + ".replaced";
  removeTree(previous);
  bool replacing = isDirectory(final);
  if (replacing && std::rename(final.c_str(), previous.c_str()) != 0)
    return fail(Status::error("cannot move the existing " + final +
                              " aside: " + std::strerror(errno)));
  if (std::rename(partial.c_str(), final.c_str()) != 0) {
    Status err = Status::error("cannot rename " + partial + " to " + final +
                               ": " + std::strerror(errno));
    if (replacing)
      std::rename(previous.c_str(), final.c_str());
    return fail(err);
  }
  removeTree(previous);
  syncDir(dir);
  if (Status s = writeFileAtomically(dir + "/" + kLatestFile, name + "\n"); !s)
    return Status::error("checkpoint " + final + " is complete but " + dir +
                         "/latest could not be updated: " + s.message());

  if (options.keep > 0) {
    std::vector<int64_t> steps = completeSteps(dir);
    for (size_t i = 0; i + size_t(options.keep) < steps.size(); ++i)
      if (steps[i] != ckpt.step)
        removeCheckpoint(dir + "/" + stepName(steps[i]), options.afterRemove);
    // What an earlier prune left when it was killed.
    for (int64_t step : stepDirectories(dir, false))
      if (step < ckpt.step)
        removeCheckpoint(dir + "/" + stepName(step), options.afterRemove);
  }
  return final;
}

std::string latestTrainCheckpoint(const std::string &dir) {
  auto text = readWholeFile(dir + "/" + kLatestFile);
  if (text) {
    std::string name = *text;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
      name.pop_back();
    if (isRegularFile(dir + "/" + name + "/" + kTrainerFile))
      return dir + "/" + name;
  }
  std::vector<int64_t> steps = completeSteps(dir);
  return steps.empty() ? "" : dir + "/" + stepName(steps.back());
}

namespace {

StatusOr<std::vector<hf::NamedTensor>> readAll(const std::string &path) {
  auto reader = hf::CheckpointReader::open(path);
  if (!reader)
    return reader.status();
  std::vector<hf::NamedTensor> out;
  for (const std::string &name : reader->tensorNames()) {
    const hf::TensorInfo *info = reader->find(name);
    auto data = reader->readTensor(name);
    if (!data)
      return data.status();
    out.push_back({name, info->dtype, info->shape, std::move(*data)});
  }
  return out;
}

} // namespace

StatusOr<TrainCheckpoint> loadTrainCheckpoint(const std::string &stepDir) {
  auto text = readWholeFile(stepDir + "/" + kTrainerFile);
  if (!text)
    return text.status();
  TrainCheckpoint ckpt;
  try {
    nlohmann::json j = nlohmann::json::parse(*text);
    if (j.value("format", 0) != kTrainerFormat)
      return Status::error(stepDir + "/" + kTrainerFile + " has format " +
                           std::to_string(j.value("format", 0)) +
                           "; this runtime reads format " +
                           std::to_string(kTrainerFormat));
    ckpt.step = j.at("step").get<int64_t>();
    ckpt.dataPosition = j.at("data_position").get<std::string>();
    ckpt.seed = j.at("seed").get<uint64_t>();
    ckpt.bundleHash = j.at("bundle_hash").get<std::string>();
    if (j.contains("loss") && j["loss"].is_number())
      ckpt.loss = j["loss"].get<double>();
  } catch (const std::exception &e) {
    return Status::error(stepDir + "/" + kTrainerFile +
                         " is not a trainer state: " + e.what());
  }
  auto model = readAll(stepDir);
  if (!model)
    return model.status();
  ckpt.model = std::move(*model);
  auto state = readAll(stepDir + "/" + kStateFile);
  if (!state)
    return state.status();
  ckpt.state = std::move(*state);
  return ckpt;
}

} // namespace octet::checkpoint
