#ifndef OCTET_RUNTIME_CHECKPOINT_TRAINSTATE_H
#define OCTET_RUNTIME_CHECKPOINT_TRAINSTATE_H

// Training checkpoints: everything a run needs to continue bit for bit.
// DIR/step-N/ holds
//   model.safetensors (or HF shards + model.safetensors.index.json):
//       the parameters under their Hugging Face names, so the directory
//       loads as a HF model's weights;
//   train_state.safetensors: optimizer moments, FP8 scales and amax
//       histories, step counter, RNG state and the weight caches the
//       optimizer step writes, under octet's slot names;
//   trainer.json: the step, the data position, the seed, the bundle's
//       content hash, and the step's loss (full precision, so that a
//       resumed run's checkpoints can be compared with a straight run's).
// DIR/latest names the newest complete one.
//
// Atomicity: a checkpoint is written into DIR/.step-N.partial and renamed
// to DIR/step-N only once every file is on disk (each file fsynced, then
// the directory); DIR/latest is replaced atomically after that. A failure
// at any point removes the partial directory and leaves the previous
// checkpoint, and DIR/latest, as they were. Pruning removes an old
// checkpoint's trainer.json first, so one half removed is never complete.

#include "hf/Safetensors.h"
#include "support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace octet::checkpoint {

struct TrainCheckpoint {
  int64_t step = 0;
  std::string dataPosition;
  uint64_t seed = 0;
  // Hex SHA-256 of the bundle that wrote it.
  std::string bundleHash;
  // The loss of the step it was saved after; absent in checkpoints written
  // before it was recorded.
  std::optional<double> loss;
  std::vector<hf::NamedTensor> model;
  std::vector<hf::NamedTensor> state;
};

struct SaveOptions {
  // Complete checkpoints kept (the newest ones); older ones are removed
  // after a save succeeds. 0 keeps every one.
  int keep = 2;
  // Called after each file of the checkpoint is written; a failure it
  // returns aborts the save as a write error would (tests inject one).
  std::function<Status(const std::string &path)> afterFile;
  // Called after each file or directory that pruning removes (tests stop
  // the process there, as a kill would).
  std::function<void(const std::string &path)> afterRemove;
};

// Writes DIR/step-<step> and points DIR/latest at it; returns its path.
StatusOr<std::string> saveTrainCheckpoint(const std::string &dir,
                                          const TrainCheckpoint &checkpoint,
                                          const SaveOptions &options = {});

// The newest complete checkpoint of DIR (from DIR/latest, else the highest
// step-N holding a trainer.json); empty when DIR does not exist or holds
// none yet.
std::string latestTrainCheckpoint(const std::string &dir);

// Reads a step-N directory written by saveTrainCheckpoint.
StatusOr<TrainCheckpoint> loadTrainCheckpoint(const std::string &stepDir);

} // namespace octet::checkpoint

#endif
