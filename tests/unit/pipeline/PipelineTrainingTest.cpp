// The training loop's CUDA-free pipeline parts (runtime/exec/
// PipelineTraining.h) on toy pipeline bundles that follow the contract: a
// chunk program's per-microbatch inputs (tokens on the first stage,
// labels on the last) are STASH slots, one entry per (chunk, microbatch).
// Which microbatch feeds which instruction and where, whether the inputs
// stay in their entry through the backward, which rank holds each
// variable, and how a checkpoint's parts join.

#include "runtime/exec/PipelineTraining.h"
#include "bundle/Bundle.h"
#include "bundle/PipelineBundle.h"

#include <gtest/gtest.h>

#include <map>

namespace octet {
namespace {

constexpr uint64_t kTokens = 8;       // tokens a microbatch
constexpr uint64_t kInputStride = 64; // bytes per input entry
constexpr uint64_t kActStride = 128;  // bytes per edge entry

struct Toy {
  bundle::Bundle bundle;
  std::map<std::string, uint32_t> slot;
};

bundle::SlotRef ref(uint32_t slot, uint64_t stride = 0) {
  bundle::SlotRef r;
  r.set_slot(slot);
  r.set_stash_stride(stride);
  return r;
}

void addCopy(bundle::Program &p, const bundle::SlotRef &dst,
             const bundle::SlotRef &src) {
  bundle::Copy *c = p.add_steps()->mutable_copy();
  *c->mutable_dst() = dst;
  *c->mutable_src() = src;
  c->set_bytes(4);
}

// P × D ranks, V chunks each. Global stage s = chunk·P + rank has a
// parameter w.s<s>; the first stage's forward takes `tokens` as an input,
// the last stage's forward `labels`; both stages' backward programs read
// them from the same entries without taking them as inputs (they rely on
// the entry holding the microbatch's data until then). Every optimizer
// step reads the shared step counter and its rank's parameters.
Toy makeToy(PipelineScheduleKind kind, int ranks, int virtualStages,
            int microbatches, int data) {
  Toy toy;
  auto schedule =
      makePipelineSchedule(kind, ranks, virtualStages, microbatches);
  EXPECT_TRUE(schedule.isOk()) << schedule.status().message();
  int entries = 0;
  for (int r = 0; r < ranks; ++r)
    entries =
        std::max(entries, bundle::assignStashEntries(*schedule, r).entries);
  bundle::Bundle &b = toy.bundle;
  bundle::MemoryPlan *plan = b.mutable_plan();
  plan->add_arenas()->set_name("main");
  uint64_t offset = 0;
  auto addSlot = [&](const std::string &name, bundle::SlotKind slotKind,
                     bundle::DType dtype, uint64_t bytes,
                     std::vector<int64_t> shape) {
    bundle::Slot *s = plan->add_slots();
    s->set_name(name);
    s->set_kind(slotKind);
    s->set_offset(offset);
    s->set_bytes(bytes);
    s->set_dtype(dtype);
    for (int64_t d : shape)
      s->add_shape(d);
    offset += (bytes + 255) / 256 * 256;
    toy.slot[name] = uint32_t(plan->slots_size() - 1);
  };
  int stages = ranks * virtualStages;
  for (int k = 0; k < virtualStages; ++k)
    addSlot("act.c" + std::to_string(k), bundle::STASH, bundle::F32,
            kActStride * uint64_t(entries), {4});
  addSlot("tokens", bundle::STASH, bundle::I32,
          kInputStride * uint64_t(entries), {int64_t(kTokens)});
  addSlot("labels", bundle::STASH, bundle::I32,
          kInputStride * uint64_t(entries), {int64_t(kTokens)});
  for (int s = 0; s < stages; ++s)
    addSlot("w.s" + std::to_string(s), bundle::PARAMETER, bundle::F32, 16, {4});
  addSlot("step", bundle::OPTIMIZER_STATE, bundle::I32, 4, {});
  addSlot("unused", bundle::OPTIMIZER_STATE, bundle::F32, 4, {});
  addSlot("loss_sum", bundle::IO, bundle::F32, 4, {});
  plan->mutable_arenas(0)->set_bytes(offset);

  EXPECT_TRUE(bundle::addPipelineRanks(
                  b, *schedule, data,
                  [&](const bundle::TransferSite &site) {
                    return std::vector<bundle::SlotRef>{
                        ref(toy.slot["act.c" + std::to_string(site.chunk)],
                            kActStride)};
                  })
                  .isOk());
  b.mutable_pipeline()->set_loss_sum_slot(toy.slot["loss_sum"]);
  for (bundle::RankProgram &rank : *b.mutable_ranks()) {
    int p = int(rank.rank()) / data;
    for (int k = 0; k < virtualStages; ++k) {
      int stage = k * ranks + p;
      bundle::SlotRef act =
          ref(toy.slot["act.c" + std::to_string(k)], kActStride);
      bundle::SlotRef w = ref(toy.slot["w.s" + std::to_string(stage)]);
      for (bundle::ProgramKind programKind :
           {bundle::CHUNK_FORWARD, bundle::CHUNK_BACKWARD,
            bundle::CHUNK_INPUT_GRADIENT, bundle::CHUNK_WEIGHT_GRADIENT}) {
        bundle::Program *program = rank.add_programs();
        program->set_kind(programKind);
        program->set_chunk(uint32_t(k));
        program->set_name(std::string(bundle::programKindName(programKind)) +
                          ".s" + std::to_string(stage));
        addCopy(*program, act, w);
        bool forward = programKind == bundle::CHUNK_FORWARD;
        for (const char *input : {"tokens", "labels"}) {
          bool wanted =
              std::string(input) == "tokens" ? stage == 0 : stage == stages - 1;
          if (!wanted)
            continue;
          addCopy(*program, act, ref(toy.slot[input], kInputStride));
          if (forward) {
            bundle::NamedSlot *in = program->add_inputs();
            in->set_name(input);
            in->set_slot(toy.slot[input]);
          }
        }
      }
    }
    bundle::Program *opt = rank.add_programs();
    opt->set_kind(bundle::OPTIMIZER_STEP);
    opt->set_name("optimizer");
    bundle::Memset *m = opt->add_steps()->mutable_memset();
    *m->mutable_dst() = ref(toy.slot["step"]);
    for (int k = 0; k < virtualStages; ++k)
      addCopy(*opt, ref(toy.slot["w.s" + std::to_string(k * ranks + p)]),
              ref(toy.slot["w.s" + std::to_string(k * ranks + p)]));
  }
  bundle::addRankArenas(b);
  Status valid = bundle::validatePipeline(b);
  EXPECT_TRUE(valid.isOk()) << valid.message();
  return toy;
}

// Every rank's feeds: the first stage's forward gets tokens, the last
// stage's forward labels, each microbatch in the entry its instruction
// runs on, and no later feed overwrites an entry before the backward that
// reads it has run.
void expectFeedsFollowTheirMicrobatch(PipelineScheduleKind kind, int ranks,
                                      int virtualStages, int microbatches,
                                      int data) {
  Toy toy = makeToy(kind, ranks, virtualStages, microbatches, data);
  const bundle::Bundle &b = toy.bundle;
  int stages = ranks * virtualStages;
  for (int world = 0; world < int(b.world_size()); ++world) {
    SCOPED_TRACE("world rank " + std::to_string(world));
    auto plan = planPipelineRank(b, world);
    ASSERT_TRUE(plan.isOk()) << plan.status().message();
    auto feeds = planPipelineFeeds(b, *plan);
    ASSERT_TRUE(feeds.isOk()) << feeds.status().message();
    ASSERT_EQ(feeds->feeds.size(), plan->work.size());
    // What each input entry holds: the microbatch last written there.
    std::map<std::pair<uint32_t, uint64_t>, int> held;
    int fed = 0;
    for (const PipeWork &w : plan->work) {
      const auto &list = feeds->feeds[w.index];
      if (w.communicate()) {
        EXPECT_TRUE(list.empty());
        continue;
      }
      int stage = int(w.instruction->chunk()) * ranks + plan->pipelineRank;
      int m = int(w.instruction->microbatch());
      bool forward = w.instruction->kind() == bundle::PIPE_FORWARD;
      std::vector<std::string> wanted;
      if (forward && stage == 0)
        wanted.push_back("tokens");
      if (forward && stage == stages - 1)
        wanted.push_back("labels");
      ASSERT_EQ(list.size(), wanted.size()) << "instruction " << w.index;
      for (size_t i = 0; i < list.size(); ++i) {
        EXPECT_EQ(list[i].name, wanted[i]);
        EXPECT_EQ(list[i].slot, toy.slot[wanted[i]]);
        EXPECT_EQ(list[i].offset, uint64_t(w.entry) * kInputStride);
        EXPECT_EQ(list[i].bytes, kTokens * 4);
        held[{list[i].slot, list[i].offset}] = m;
        ++fed;
      }
      // A backward reads the inputs its forward was fed.
      if (!forward)
        for (const char *input : {"tokens", "labels"}) {
          bool reads =
              std::string(input) == "tokens" ? stage == 0 : stage == stages - 1;
          if (!reads)
            continue;
          auto it =
              held.find({toy.slot[input], uint64_t(w.entry) * kInputStride});
          ASSERT_NE(it, held.end()) << input << " never fed before " << w.index;
          EXPECT_EQ(it->second, m)
              << input << " of microbatch " << m << " was overwritten by "
              << it->second << " before instruction " << w.index;
        }
    }
    // Each first or last stage gets every microbatch once per such chunk.
    int expected = 0;
    for (int k = 0; k < virtualStages; ++k) {
      int stage = k * ranks + plan->pipelineRank;
      expected += (stage == 0) * microbatches;
      expected += (stage == stages - 1) * microbatches;
    }
    EXPECT_EQ(fed, expected);
    EXPECT_EQ(feeds->inputs.size(),
              size_t(plan->pipelineRank == 0) +
                  size_t(plan->pipelineRank == ranks - 1));
  }
}

TEST(PipelineFeeds, OneFOneBFeedsEachMicrobatchIntoItsEntry) {
  expectFeedsFollowTheirMicrobatch(PipelineScheduleKind::OneFOneB, 2, 1, 4, 1);
  expectFeedsFollowTheirMicrobatch(PipelineScheduleKind::OneFOneB, 4, 1, 8, 1);
}

TEST(PipelineFeeds, InterleavedFeedsTheFirstAndLastChunks) {
  expectFeedsFollowTheirMicrobatch(PipelineScheduleKind::Interleaved, 2, 2, 4,
                                   1);
  expectFeedsFollowTheirMicrobatch(PipelineScheduleKind::Interleaved, 2, 2, 8,
                                   1);
}

TEST(PipelineFeeds, ZeroBubbleKeepsInputsUntilTheWeightGradient) {
  expectFeedsFollowTheirMicrobatch(PipelineScheduleKind::ZeroBubbleH1, 3, 1, 6,
                                   1);
}

TEST(PipelineFeeds, EveryReplicaOfPipelineTimesDataIsFed) {
  expectFeedsFollowTheirMicrobatch(PipelineScheduleKind::OneFOneB, 2, 1, 4, 2);
}

// The rank-0 plan's feeds of a toy whose first forward program was
// changed by `edit`.
StatusOr<PipelineFeedPlan>
feedsAfter(const std::function<void(Toy &, bundle::Program &)> &edit) {
  Toy toy = makeToy(PipelineScheduleKind::OneFOneB, 2, 1, 4, 1);
  for (bundle::Program &p : *toy.bundle.mutable_ranks(0)->mutable_programs())
    if (p.kind() == bundle::CHUNK_FORWARD)
      edit(toy, p);
  auto plan = planPipelineRank(toy.bundle, 0);
  if (!plan)
    return plan.status();
  return planPipelineFeeds(toy.bundle, *plan);
}

TEST(PipelineFeeds, RefusesAnInputOutsideTheStash) {
  auto feeds = feedsAfter([](Toy &toy, bundle::Program &p) {
    p.mutable_inputs(0)->set_slot(toy.slot["loss_sum"]);
  });
  ASSERT_FALSE(feeds.isOk());
  EXPECT_NE(feeds.status().message().find("input 'tokens' is slot 'loss_sum' "
                                          "of kind IO"),
            std::string::npos)
      << feeds.status().message();
  EXPECT_NE(feeds.status().message().find("STASH"), std::string::npos);
}

TEST(PipelineFeeds, RefusesAnInputNoStepAddresses) {
  auto feeds = feedsAfter(
      [](Toy &, bundle::Program &p) { p.mutable_steps()->RemoveLast(); });
  ASSERT_FALSE(feeds.isOk());
  EXPECT_NE(feeds.status().message().find("stash stride is unknown"),
            std::string::npos)
      << feeds.status().message();
}

TEST(PipelineFeeds, RefusesAnInputAddressedWithTwoStrides) {
  auto feeds = feedsAfter([](Toy &toy, bundle::Program &p) {
    addCopy(p, ref(toy.slot["act.c0"], kActStride),
            ref(toy.slot["tokens"], 2 * kInputStride));
  });
  ASSERT_FALSE(feeds.isOk());
  EXPECT_NE(feeds.status().message().find("stash strides 64, 128"),
            std::string::npos)
      << feeds.status().message();
}

TEST(PipelineFeeds, RefusesAnInputLargerThanItsEntry) {
  auto feeds = feedsAfter([](Toy &toy, bundle::Program &) {
    toy.bundle.mutable_plan()
        ->mutable_slots(int(toy.slot["tokens"]))
        ->set_shape(0, int64_t(kInputStride));
  });
  ASSERT_FALSE(feeds.isOk());
  EXPECT_NE(feeds.status().message().find("more than its stash stride of 64"),
            std::string::npos)
      << feeds.status().message();
}

TEST(PipelineOwners, EachStageHoldsItsOwnParameters) {
  Toy toy = makeToy(PipelineScheduleKind::Interleaved, 2, 2, 4, 2);
  auto users = pipelineSlotUsers(toy.bundle);
  // Stage s = chunk·P + rank: w.s0 and w.s2 on rank 0, w.s1 and w.s3 on 1.
  for (int s = 0; s < 4; ++s) {
    uint32_t slot = toy.slot["w.s" + std::to_string(s)];
    EXPECT_EQ(users[slot], std::set<int>{s % 2}) << "w.s" << s;
    EXPECT_EQ(ownsPipelineVariable(users, slot, s % 2), true);
    EXPECT_EQ(ownsPipelineVariable(users, slot, 1 - s % 2), false);
  }
  // Every rank's optimizer counts steps: the first rank's copy is saved.
  EXPECT_EQ(users[toy.slot["step"]], (std::set<int>{0, 1}));
  EXPECT_TRUE(ownsPipelineVariable(users, toy.slot["step"], 0));
  EXPECT_FALSE(ownsPipelineVariable(users, toy.slot["step"], 1));
  // No program addresses it: every rank holds its initial value.
  EXPECT_EQ(users.count(toy.slot["unused"]), 0u);
  EXPECT_TRUE(ownsPipelineVariable(users, toy.slot["unused"], 0));
  EXPECT_FALSE(ownsPipelineVariable(users, toy.slot["unused"], 1));
}

hf::NamedTensor tensor(const std::string &name, std::vector<uint8_t> data,
                       std::vector<int64_t> shape) {
  return {name, octet::DType::BF16, std::move(shape), std::move(data)};
}

TEST(PipelineCheckpoint, PackedTensorsReadBack) {
  std::vector<hf::NamedTensor> tensors = {
      tensor("model.embed_tokens.weight", {1, 2, 3, 4}, {2, 1}),
      tensor("empty", {}, {0}), tensor("step", {9, 0, 0, 0}, {})};
  tensors[2].dtype = octet::DType::I32;
  std::vector<uint8_t> packed = packTensors(tensors);
  auto back = unpackTensors(packed);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  ASSERT_EQ(back->size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ((*back)[i].name, tensors[i].name);
    EXPECT_EQ((*back)[i].dtype, tensors[i].dtype);
    EXPECT_EQ((*back)[i].shape, tensors[i].shape);
    EXPECT_EQ((*back)[i].data, tensors[i].data);
  }
  packed.pop_back();
  auto cut = unpackTensors(packed);
  ASSERT_FALSE(cut.isOk());
  EXPECT_NE(cut.status().message().find("do not read as tensors"),
            std::string::npos);
  packed.push_back(4);
  packed.push_back(0);
  EXPECT_FALSE(unpackTensors(packed).isOk());
}

TEST(PipelineCheckpoint, JoinsEachRanksOwnInTheWholeOrder) {
  std::vector<std::string> order = {"embed", "layers.0", "layers.1", "head",
                                    "step"};
  std::vector<std::vector<hf::NamedTensor>> parts = {
      {tensor("embed", {1}, {1}), tensor("layers.0", {2}, {1}),
       tensor("step", {5}, {1})},
      {tensor("head", {4}, {1}), tensor("layers.1", {3}, {1})}};
  auto whole = joinPipelineParts(order, parts);
  ASSERT_TRUE(whole.isOk()) << whole.status().message();
  ASSERT_EQ(whole->size(), order.size());
  for (size_t i = 0; i < order.size(); ++i)
    EXPECT_EQ((*whole)[i].name, order[i]);
  EXPECT_EQ((*whole)[3].data, std::vector<uint8_t>{4});

  auto twice = parts;
  twice[1].push_back(tensor("step", {5}, {1}));
  auto dup = joinPipelineParts(order, twice);
  ASSERT_FALSE(dup.isOk());
  EXPECT_NE(dup.status().message().find("pipeline ranks 0 and 1 both hold "
                                        "'step'"),
            std::string::npos)
      << dup.status().message();

  auto missing = parts;
  missing[1].pop_back();
  auto lost = joinPipelineParts(order, missing);
  ASSERT_FALSE(lost.isOk());
  EXPECT_NE(lost.status().message().find("no pipeline rank holds 'layers.1'"),
            std::string::npos)
      << lost.status().message();

  auto extra = parts;
  extra[1].push_back(tensor("stray", {0}, {1}));
  auto stray = joinPipelineParts(order, extra);
  ASSERT_FALSE(stray.isOk());
  EXPECT_NE(stray.status().message().find("pipeline rank 1 holds 'stray'"),
            std::string::npos)
      << stray.status().message();
}

} // namespace
} // namespace octet
