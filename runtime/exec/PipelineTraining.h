#ifndef OCTET_RUNTIME_EXEC_PIPELINETRAINING_H
#define OCTET_RUNTIME_EXEC_PIPELINETRAINING_H

// What the training loop needs to train a pipeline bundle, without CUDA:
//   feeds        which microbatch's batch each compute instruction reads,
//                and where: a chunk program's per-microbatch inputs
//                (tokens, labels, positions, cu_seqlens...) are STASH
//                slots, one entry per (chunk, microbatch) like the
//                activations, so microbatch k's inputs go into the entry
//                the executor's plan gives that pair, before its forward,
//                and stay there through its backward;
//   owners       which pipeline rank holds each variable in its arena (a
//                stage's parameters, their moments and FP8 state on one
//                rank; the step counter on every rank);
//   checkpoints  each pipeline rank's own tensors packed into bytes, sent
//                to rank 0 and joined into the whole checkpoint of a job
//                of one rank (the format a data-parallel job writes), so a
//                checkpoint moves between pipeline sizes.

#include "bundle/bundle.pb.h"
#include "hf/Safetensors.h"
#include "runtime/exec/PipelineExecutor.h"
#include "support/Status.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace octet {

// One input a compute instruction's program reads: `bytes` at `offset` of
// slot `slot` (the instruction's stash entry times the slot's stride).
struct PipelineFeed {
  std::string name;
  uint32_t slot = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct PipelineFeedPlan {
  // Per instruction of the rank's plan (empty for communication groups and
  // programs without inputs).
  std::vector<std::vector<PipelineFeed>> feeds;
  // Every input name, with the bytes one microbatch of it has (the same in
  // every program that takes it).
  std::map<std::string, uint64_t> inputs;
};

// The feeds of a rank's plan. An input that is not a stash slot, a stash
// slot the program's steps address with no stride or two strides, or one
// whose tensor is larger than its stride, is an error naming the program
// and the input: the compiler and the runtime disagree on the contract.
StatusOr<PipelineFeedPlan> planPipelineFeeds(const bundle::Bundle &bundle,
                                             const PipelineRankPlan &plan);

// For each slot that a rank of the first pipeline holds
// (bundle::pipelineRankSlots: its programs address it, or it is the rank's
// variable or every rank's), the pipeline ranks (indices in the pipeline
// group) that hold it.
std::map<uint32_t, std::set<int>>
pipelineSlotUsers(const bundle::Bundle &bundle);

// Whether pipeline rank `pipelineRank` speaks for the variable in slot
// `slot` in a checkpoint: the first of the ranks that hold it, rank 0 for
// a slot none holds.
bool ownsPipelineVariable(const std::map<uint32_t, std::set<int>> &users,
                          uint32_t slot, int pipelineRank);

// The held-out batches of an evaluation: `requested` (--eval-batches), or
// when 0 the held-out split's count capped at 16 (4 when it has none). A
// pipeline (`pipelineMicrobatches` > 0) evaluates whole forward-only steps
// of that many microbatches on each of its `replicas`, so its count is a
// multiple of their product (the default rounded down to one, at least one
// step's) and any other request is an error naming the flag.
StatusOr<int64_t> evaluationBatches(int64_t requested, uint64_t heldOut,
                                    int64_t pipelineMicrobatches,
                                    int64_t replicas);

// Tensors as bytes and back, for the ranks to send a checkpoint's parts to
// rank 0.
std::vector<uint8_t> packTensors(const std::vector<hf::NamedTensor> &tensors);
StatusOr<std::vector<hf::NamedTensor>>
unpackTensors(const std::vector<uint8_t> &bytes);

// The whole checkpoint's tensors, in `order`, from each pipeline rank's
// own (`parts[p]`): each name must come from exactly one rank.
StatusOr<std::vector<hf::NamedTensor>>
joinPipelineParts(const std::vector<std::string> &order,
                  std::vector<std::vector<hf::NamedTensor>> parts);

} // namespace octet

#endif
