// octet-emit-ptx, and the emitPtx API it wraps.

#include "compiler/Codegen/Passes.h"

#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace octet::codegen {
#define GEN_PASS_DEF_EMITPTX
#include "compiler/Codegen/Passes.h.inc"
} // namespace octet::codegen

using namespace mlir;

namespace octet::codegen {
namespace {

std::string findPtxas(StringRef requested) {
  if (requested == "none")
    return "";
  if (!requested.empty())
    return requested.str();
  SmallVector<StringRef> hints;
  std::string cudaBin;
  if (const char *home = std::getenv("CUDA_HOME")) {
    cudaBin = std::string(home) + "/bin";
    hints.push_back(cudaBin);
  }
  hints.push_back("/usr/local/cuda/bin");
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  if (auto found = llvm::sys::findProgramByName("ptxas", hints))
    return *found;
  return "";
}

LogicalResult writeFile(Operation *op, StringRef path, StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return op->emitError("cannot write ") << path << ": " << ec.message();
  os << text;
  return success();
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

llvm::json::Object describeBuffer(std::string name, StringRef role, Type type) {
  auto t = cast<RankedTensorType>(type);
  llvm::json::Array shape;
  for (int64_t d : t.getShape())
    shape.push_back(d);
  int64_t bits = t.getElementType().getIntOrFloatBitWidth();
  return llvm::json::Object{
      {"name", name},
      {"role", role},
      {"dtype", typeName(t.getElementType())},
      {"shape", std::move(shape)},
      {"bytes", std::max<int64_t>(t.getNumElements(), 1) * bits / 8}};
}

struct EmitPtxPass : impl::EmitPtxBase<EmitPtxPass> {
  using EmitPtxBase::EmitPtxBase;
  void runOnOperation() override {
    if (dir.empty()) {
      getOperation().emitError("octet-emit-ptx needs dir=<folder>");
      return signalPassFailure();
    }
    if (failed(emitPtx(getOperation(), dir, ptxas)))
      signalPassFailure();
  }
};

} // namespace

LogicalResult emitPtx(ModuleOp module, StringRef dir, StringRef ptxasPath) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return module.emitError("cannot create ") << dir << ": " << ec.message();
  std::string ptxas = findPtxas(ptxasPath);
  llvm::StringMap<std::string> cubinOf;
  bool any = false;
  for (auto binary : module.getOps<gpu::BinaryOp>()) {
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      if (object.getFormat() != gpu::CompilationTarget::Assembly)
        return binary.emitError("expected PTX (gpu-module-to-binary "
                                "format=isa), got another format");
      any = true;
      SmallString<128> ptx(dir);
      llvm::sys::path::append(ptx, binary.getName() + ".ptx");
      if (failed(writeFile(binary, ptx, object.getObject().getValue())))
        return failure();
      if (ptxas.empty())
        continue;
      // Assembled here so that a run needs no driver JIT.
      SmallString<128> cubin(dir);
      llvm::sys::path::append(cubin, binary.getName() + ".cubin");
      std::string chip = "sm_90a";
      if (auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget()))
        chip = target.getChip().str();
      std::string arch = "-arch=" + chip;
      SmallVector<StringRef> args = {ptxas, arch, "-O3", ptx, "-o", cubin};
      std::string error;
      int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, {}, 0, 0,
                                         &error);
      if (rc != 0)
        return binary.emitError("ptxas failed on ")
               << ptx << " (exit " << rc << ")" << (error.empty() ? "" : ": ")
               << error;
      cubinOf[binary.getName()] = llvm::sys::path::filename(cubin).str();
    }
  }
  if (!any)
    return module.emitError("no gpu.binary to emit: run the codegen "
                            "pipeline (octet-codegen) first");

  llvm::json::Array kernels;
  // kernel.fused regions and the attention ops: every op with a launch list.
  int attentionIndex = 0;
  module.walk([&](kernel::LaunchedOpInterface op) {
    if (!op.hasLaunches())
      return;
    auto fused = dyn_cast<kernel::FusedOp>(op.getOperation());
    std::string moduleName;
    llvm::json::Array launchList;
    for (kernel::LaunchAttr l : op.getLaunches()) {
      moduleName = l.getKernel().getRootReference().str();
      llvm::json::Object launch{
          {"kernel", l.getKernel().getLeafReference().getValue()},
          {"grid", l.getGrid()},
          {"block", l.getBlock()}};
      if (l.getSharedBytes())
        launch["shared_bytes"] = l.getSharedBytes();
      if (l.getCluster() != 1)
        launch["cluster"] = l.getCluster();
      if (l.getProgrammatic())
        launch["programmatic"] = true;
      launchList.push_back(std::move(launch));
    }
    llvm::json::Array args;
    TypeRange inputs = fused ? TypeRange(fused.getInputs().getTypes())
                             : TypeRange(op->getOperandTypes());
    for (auto [i, t] : llvm::enumerate(inputs))
      args.push_back(describeBuffer("in" + std::to_string(i), "input", t));
    for (auto [i, t] : llvm::enumerate(op->getResultTypes()))
      args.push_back(describeBuffer("out" + std::to_string(i), "result", t));
    int64_t workspace = op.getWorkspaceBytesOrZero();
    if (workspace)
      args.push_back(llvm::json::Object{{"name", "workspace"},
                                        {"role", "workspace"},
                                        {"dtype", "f32"},
                                        {"shape", llvm::json::Array{workspace / 4}},
                                        {"bytes", workspace}});
    llvm::json::Array zeroed;
    for (int64_t i : op.getZeroedResults())
      zeroed.push_back(i);
    // Attention ops have no name of their own: kind and index in the module.
    std::string kind = fused ? fused.getKind().str()
                             : op->getName().stripDialect().str();
    std::string name = fused ? fused.getName().str()
                             : kind + "_" + std::to_string(attentionIndex++);
    llvm::json::Object entry{{"name", name},
                             {"kind", kind},
                             {"module", moduleName},
                             {"ptx", moduleName + ".ptx"},
                             {"launches", std::move(launchList)},
                             {"args", std::move(args)},
                             {"workspace_bytes", workspace},
                             {"zero_results", std::move(zeroed)}};
    if (op.getArgTable())
      entry["arg_table"] = true;
    if (cubinOf.count(moduleName))
      entry["cubin"] = cubinOf[moduleName];
    if (!fused) {
      // What a caller needs besides the buffers: causality and the scale.
      llvm::json::Object attrs;
      attrs["causal"] = op->hasAttr("causal");
      if (auto scale = op->getAttrOfType<FloatAttr>("scale"))
        attrs["scale"] = scale.getValueAsDouble();
      entry["attributes"] = std::move(attrs);
      // Tensor maps the launch passes before the buffers (Hopper forward).
      if (auto maps = op->getAttrOfType<ArrayAttr>("tensor_maps")) {
        llvm::json::Array list;
        for (auto map : maps.getAsRange<DictionaryAttr>()) {
          llvm::json::Object m;
          for (NamedAttribute field : map)
            m[field.getName().getValue()] =
                cast<IntegerAttr>(field.getValue()).getInt();
          list.push_back(std::move(m));
        }
        entry["tensor_maps"] = std::move(list);
      }
    }
    kernels.push_back(std::move(entry));
  });
  SmallString<128> manifest(dir);
  llvm::sys::path::append(manifest, "kernels.json");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}",
                      llvm::json::Value(llvm::json::Object{
                          {"format", 1}, {"kernels", std::move(kernels)}}));
  os << "\n";
  return writeFile(module, manifest, text);
}

} // namespace octet::codegen
