#ifndef OCTET_TOOLS_OCTET_CPUCHECKPOINT_H
#define OCTET_TOOLS_OCTET_CPUCHECKPOINT_H

// Checkpoints of `octet train` on the CPU interpreter, in the GPU trainer's
// format (runtime/checkpoint/TrainState.h): DIR/step-N with the parameters
// under their Hugging Face names (model.safetensors, F32: the
// interpreter's values exactly), every other variable under its octet name
// (train_state.safetensors: gradient accumulators, AdamW moments, step
// counter, FP8 scales and amax histories, weight caches), and trainer.json.
// Restoring all of them and continuing at the next microbatch gives the
// uninterrupted run's numbers bit for bit.

#include "compiler/Interpreter/Interpreter.h"
#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace octet {

struct CpuCheckpointRun {
  std::string dir;
  uint64_t seed = 0;
  // SHA-256 of the compiled program (the fused IR's text), in place of a
  // bundle's content hash.
  std::string programHash;
};

// The fused IR's SHA-256, for CpuCheckpointRun::programHash.
std::string programHash(mlir::ModuleOp module);

// Writes DIR/step-<step> from `store`, with the data source's position
// after that step and the step's loss; returns its path.
StatusOr<std::string> saveCpuCheckpoint(const CpuCheckpointRun &run,
                                        int64_t step,
                                        const std::string &dataPosition,
                                        double loss,
                                        mlir::ModuleOp module,
                                        const interp::VariableStore &store);

// Variables whose dimension 0 the data-parallel ranks share out
// (octet-shard-optimizer's `data_shards`): name -> number of parts.
std::map<std::string, int64_t> shardedVariables(mlir::ModuleOp module);

// The accumulators an in-place reduce-scatter leaves rank-local outside the
// rank's part: with the first microbatch writing them (no clearing between
// steps), they differ across ranks between steps, and nothing reads them
// before they are written again.
std::set<std::string> rankLocalVariables(mlir::ModuleOp module);

// Rank 0's variables with every sharded one joined from the ranks' parts
// (in rank order): what a checkpoint holds, at any number of ranks.
interp::VariableStore wholeVariables(mlir::ModuleOp module,
                                     const std::vector<interp::VariableStore> &ranks);

// The inverse: each rank keeps its part of every sharded variable, which
// `ranks` hold whole (as a checkpoint restored them); rank p·data + d keeps
// part d.
void keepRankParts(mlir::ModuleOp module,
                   std::vector<interp::VariableStore> &ranks);

// Variables one pipeline rank alone holds (octet-split-optimizer's
// `pipeline_rank`): name -> that rank.
std::map<std::string, int64_t> pipelineRankVariables(mlir::ModuleOp module);

// Rank p·data + d keeps only pipeline rank p's variables and the
// replicated ones, dropping what `ranks` hold of the others.
void keepPipelineRankVariables(mlir::ModuleOp module, int64_t data,
                               std::vector<interp::VariableStore> &ranks);

// The inverse: rank 0's variables with each pipeline rank's own joined in
// (from its data group's first rank, or its data group's parts joined
// where ZeRO-1 shards them), what a checkpoint holds.
interp::VariableStore
joinPipelineRanks(mlir::ModuleOp module, int64_t data,
                  const std::vector<interp::VariableStore> &ranks);

struct CpuResume {
  int64_t step = 0;
  std::string dataPosition;
  // The checkpoint holds no FP8 copy of some weight the program keeps (it
  // was saved where the step casts them): the init functions make them
  // again from the restored parameters and scales.
  bool remakeWeightCopies = false;
};

// Loads the step-N directory `stepDir` into `store` (initialised for
// `module` first, so that every variable's shape and dtype are known).
// Sharded variables come back whole (keepRankParts cuts them).
// Errors name the directory and what does not match (another model or
// seed).
StatusOr<CpuResume> loadCpuCheckpoint(const CpuCheckpointRun &run,
                                    const std::string &stepDir,
                                    mlir::ModuleOp module,
                                    interp::VariableStore &store);

} // namespace octet

#endif
