// The runtime's GEMMs at load: the bundle's descriptors converted to the
// BLAS layer's, one blas::Gemm each, and each one's cuBLASLt algorithm
// chosen once (recorded, cached or timed) and written back on request.

#include "runtime/exec/Runtime.h"

#include "bundle/Bundle.h"
#include "runtime/blas/GemmTuningCache.h"
#include "runtime/exec/RuntimePrepared.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace octet {

using namespace octet::bundle;

namespace {

StatusOr<octet::DType> gemmType(bundle::DType t, const std::string &what) {
  std::optional<octet::DType> dtype = dtypeFromProto(t);
  if (!dtype || !blas::isGemmType(*dtype))
    return Status::error(what + " has type " + dtypeName(t) +
                         ", which no GEMM takes");
  return *dtype;
}

} // namespace

StatusOr<blas::GemmDesc> toGemmDesc(const GemmDescriptor &g) {
  blas::GemmDesc d;
  d.name = g.name();
  d.role = g.role() == FPROP   ? blas::Role::Fprop
           : g.role() == DGRAD ? blas::Role::Dgrad
           : g.role() == WGRAD ? blas::Role::Wgrad
                               : blas::Role::Unspecified;
  d.m = g.m(), d.n = g.n(), d.k = g.k();
  std::string at = "GEMM '" + g.name() + "'";
  auto a = gemmType(g.a_type(), at + " operand A");
  auto b = gemmType(g.b_type(), at + " operand B");
  auto o = gemmType(g.d_type(), at + " output D");
  if (!a)
    return a.status();
  if (!b)
    return b.status();
  if (!o)
    return o.status();
  d.a = *a, d.b = *b, d.d = *o;
  d.transposeA = g.transpose_a(), d.transposeB = g.transpose_b();
  d.lda = g.lda(), d.ldb = g.ldb(), d.ldd = g.ldd();
  switch (g.epilogue()) {
  case EPILOGUE_NONE:
    d.epilogue = blas::Epilogue::None;
    break;
  case EPILOGUE_BIAS:
    d.epilogue = blas::Epilogue::Bias;
    break;
  case EPILOGUE_GELU:
    d.epilogue = blas::Epilogue::Gelu;
    break;
  case EPILOGUE_BIAS_GELU:
    d.epilogue = blas::Epilogue::BiasGelu;
    break;
  case EPILOGUE_GELU_AUX:
    d.epilogue = blas::Epilogue::GeluAux;
    break;
  case EPILOGUE_BIAS_GELU_AUX:
    d.epilogue = blas::Epilogue::BiasGeluAux;
    break;
  case EPILOGUE_BIAS_GRAD:
    d.epilogue = blas::Epilogue::BiasGrad;
    break;
  default:
    return Status::error(at + " has an unknown epilogue " +
                         std::to_string(int(g.epilogue())));
  }
  if (g.bias_type() != DTYPE_UNSPECIFIED) {
    auto bt = gemmType(g.bias_type(), at + " bias");
    if (!bt)
      return bt.status();
    d.biasType = *bt;
  } else {
    d.biasType = isFp8(d.d) ? octet::DType::BF16 : d.d;
  }
  if (g.aux_type() != DTYPE_UNSPECIFIED) {
    auto xt = gemmType(g.aux_type(), at + " aux");
    if (!xt)
      return xt.status();
    d.auxType = *xt;
  }
  d.auxLd = g.aux_ld();
  d.fastAccum = g.fast_accum();
  d.accumulate = g.accumulate();
  d.aScale = g.has_a_scale(), d.bScale = g.has_b_scale();
  for (auto [mode, out, which] :
       {std::make_tuple(g.a_scale_mode(), &d.aScaleMode, "A"),
        std::make_tuple(g.b_scale_mode(), &d.bScaleMode, "B")}) {
    switch (mode) {
    case SCALE_TENSORWISE:
      *out = blas::ScaleMode::Tensorwise;
      break;
    case SCALE_VEC128:
      *out = blas::ScaleMode::Vec128;
      break;
    case SCALE_BLK128X128:
      *out = blas::ScaleMode::Blk128x128;
      break;
    default:
      return Status::error(at + " has an unknown " + which +
                           " scale mode " + std::to_string(int(mode)) +
                           ": a bundle from a newer octet?");
    }
  }
  d.dScale = g.has_d_scale(), d.amaxD = g.has_amax_d();
  d.workspaceBytes = g.workspace_bytes();
  d.batch = std::max<int64_t>(1, g.batch());
  d.strideA = g.stride_a(), d.strideB = g.stride_b(), d.strideD = g.stride_d();
  return d;
}

Status Runtime::createGemms(const GemmTuningOptions &options) {
  if (bundle_.gemms_size() > 0) {
    auto h = blas::BlasHandle::create();
    if (!h)
      return h.status();
    blas_ = std::move(*h);
  }
  for (const GemmDescriptor &g : bundle_.gemms()) {
    auto desc = toGemmDesc(g);
    if (!desc)
      return desc.status();
    std::string note;
    auto gemm = blas::Gemm::create(blas_->get(), *desc, g.algorithm(), &note,
                                   options.timed ? options.candidates : 1,
                                   options.timed ? options.configurations : 0);
    if (!gemm)
      return gemm.status();
    if (!note.empty())
      notes_.push_back(note);
    gemms_.push_back(std::move(*gemm));
  }
  return Status::ok();
}

Status Runtime::chooseAlgorithms(const GemmTuningOptions &options) {
  auto begin = std::chrono::steady_clock::now();
  tuning_ = GemmTuningReport{};
  tuning_.gemms = int(gemms_.size());
  // The operands of each GEMM's first call: its own shapes in the arena.
  std::map<const blas::Gemm *, const blas::GemmArgs *> firstCall;
  for (const auto &prog : programs_)
    for (const PreparedStep &step : prog->steps)
      if (step.kind == PreparedStep::Kind::Gemm)
        firstCall.emplace(step.gemm, &step.gemmArgs);
  blas::GemmTuningCache cache;
  if (options.timed && !options.cacheFile.empty()) {
    auto loaded = blas::GemmTuningCache::load(options.cacheFile);
    if (!loaded)
      return loaded.status().withContext(
          "the cuBLASLt algorithm cache (--gemm-cache)");
    cache = std::move(*loaded);
  }
  const std::string device = device_->name() + " sm_" +
                             std::to_string(device_->major()) +
                             std::to_string(device_->minor());
  const std::string version = std::to_string(cublasLtGetVersion());
  // Layers share descriptors: the first GEMM of each is timed, the others
  // take its winner.
  std::map<std::string, std::string> chosen;
  bool timedAny = false;
  for (const auto &gemm : gemms_) {
    if (gemm->usedRecordedAlgorithm()) {
      ++tuning_.recorded;
      continue;
    }
    std::string key = gemm->desc().key();
    if (auto it = chosen.find(key); it != chosen.end()) {
      if (!gemm->useAlgorithm(it->second))
        return Status::error("GEMM '" + gemm->desc().name +
                             "': cuBLASLt refuses the algorithm chosen for "
                             "another GEMM of the same descriptor");
      continue;
    }
    auto call = firstCall.find(gemm.get());
    if (!options.timed || call == firstCall.end() || gemm->candidates() < 2) {
      ++tuning_.heuristic;
      chosen[key] = gemm->algorithmBytes();
      continue;
    }
    if (const blas::GemmTuningEntry *e = cache.find(device, version, key);
        e && gemm->useAlgorithm(e->algorithm)) {
      ++tuning_.cached;
      chosen[key] = gemm->algorithmBytes();
      continue;
    }
    auto us = gemm->tune(*call->second, mainStream(), options.reps);
    if (!us)
      return us.status();
    ++tuning_.timed;
    if (gemm->candidates() > gemm->heuristicAnswers())
      ++tuning_.widened;
    timedAny = true;
    chosen[key] = gemm->algorithmBytes();
    cache.put({device, version, key, chosen[key], *us});
  }
  // The timing calls wrote what their operands made into the arena; the
  // host finds it zeroed instead.
  if (timedAny)
    for (const auto &arena : arenas_)
      OCTET_CHECK_CUDA(
          cuMemsetD8Async(arena->base(), 0, arena->bytes(), mainStream()));
  OCTET_RETURN_IF_ERROR(synchronize());
  tuning_.seconds = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - begin)
                        .count();
  if (timedAny && rank_ == 0 && !options.cacheFile.empty()) {
    if (Status st = cache.save(options.cacheFile); !st)
      notes_.push_back("could not write the cuBLASLt algorithm cache: " +
                       st.message() + "; the next run times again");
    else
      tuning_.saved = true;
  }
  return Status::ok();
}

int Runtime::recordAlgorithms(Bundle &out) const {
  int changed = 0;
  for (size_t i = 0; i < gemms_.size() && int(i) < out.gemms_size(); ++i) {
    std::string algo = gemms_[i]->algorithmBytes();
    GemmDescriptor *g = out.mutable_gemms(int(i));
    if (g->algorithm() != algo) {
      g->set_algorithm(algo);
      g->set_algorithm_cublaslt_version(cublasLtGetVersion());
      ++changed;
    }
  }
  return changed;
}

} // namespace octet
