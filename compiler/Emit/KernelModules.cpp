#include "compiler/Emit/KernelModules.h"

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Plan/MemoryPlan.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace octet::emit {

namespace {

std::string operandFactors(kernel::GemmOp gemm, bool operandB) {
  auto block = operandB ? gemm.getBBlock() : gemm.getABlock();
  auto shape = cast<RankedTensorType>(
                   (operandB ? gemm.getB() : gemm.getA()).getType())
                   .getShape();
  return ((*block)[0] == 1 ? "vec128_" : "blk128x128_") +
         std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
}

} // namespace

std::string gemmBlockFactorKernel(Operation *op) {
  auto gemm = cast<kernel::GemmOp>(op);
  return operandFactors(gemm, false) + "_" + operandFactors(gemm, true);
}

int64_t gemmBlockFactorThreads(Operation *op) {
  auto gemm = cast<kernel::GemmOp>(op);
  auto count = [](Value scale) {
    return cast<RankedTensorType>(scale.getType()).getNumElements();
  };
  return count(gemm.getAScale()) + count(gemm.getBScale());
}

namespace {

// One launch per GEMM (a launch is some microseconds of a step however
// small its work): one thread per quantize scale s of block (r, kb), A's
// scales then B's, writing 1 / s at cuBLASLt's place for it in that
// operand's factors (B's from plan::dequantFactorOffsetB), row stride
// GemmOp::getDequantFactorStride: (kb, r) for 1x128 tiles, (r, kb) for
// 128x128 blocks. The factors in the 16-byte padding of a 128x128 row are
// never read.
void addBlockFactorKernels(ModuleOp module) {
  SmallVector<kernel::GemmOp> gemms;
  module.walk([&](kernel::GemmOp gemm) {
    if (gemm.getABlock() && !plan::takesBlockFactors(gemm))
      gemms.push_back(gemm);
  });
  if (gemms.empty() || module.lookupSymbol(kGemmBlockFactorModule))
    return;
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, kGemmBlockFactorModule);
  b.setInsertionPointToStart(gpuModule.getBody());
  llvm::StringSet<> made;
  for (kernel::GemmOp gemm : gemms) {
    std::string name = gemmBlockFactorKernel(gemm);
    if (!made.insert(name).second)
      continue;
    auto global = [&](int64_t n) {
      return MemRefType::get({n}, b.getF32Type(), MemRefLayoutAttrInterface(),
                             b.getI64IntegerAttr(1));
    };
    auto scaleCount = [&](bool operandB) {
      return cast<RankedTensorType>(
                 (operandB ? gemm.getBScale() : gemm.getAScale()).getType())
          .getNumElements();
    };
    OpBuilder::InsertionGuard guard(b);
    auto func = gpu::GPUFuncOp::create(
        b, loc, name,
        b.getFunctionType({global(scaleCount(false)), global(scaleCount(true)),
                           global(plan::dequantFactorFloats(gemm))},
                          {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    b.setInsertionPointToStart(&func.getBody().front());
    auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
    Value i = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc,
                              gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
                              c(kGemmBlockFactorThreads)),
        gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
    Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
    // Operand A's threads, then B's: `first` is the operand's first thread.
    int64_t first = 0;
    for (bool operandB : {false, true}) {
      auto scaleType = cast<RankedTensorType>(
          (operandB ? gemm.getBScale() : gemm.getAScale()).getType());
      int64_t rows = scaleType.getShape()[0], cols = scaleType.getShape()[1];
      bool tiles =
          (*(operandB ? gemm.getBBlock() : gemm.getABlock()))[0] == 1;
      int64_t stride = gemm.getDequantFactorStride(operandB);
      int64_t base = operandB ? plan::dequantFactorOffsetB(gemm) / 4 : 0;
      OpBuilder::InsertionGuard inFunc(b);
      Value mine = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, i,
                                c(first)),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i,
                                c(first + rows * cols)));
      auto ifOp = scf::IfOp::create(b, loc, mine, false);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value j = arith::SubIOp::create(b, loc, i, c(first));
      Value r = arith::DivUIOp::create(b, loc, j, c(cols));
      Value kb = arith::RemUIOp::create(b, loc, j, c(cols));
      Value at =
          tiles ? arith::AddIOp::create(
                      b, loc, arith::MulIOp::create(b, loc, kb, c(stride)), r)
                : arith::AddIOp::create(
                      b, loc, arith::MulIOp::create(b, loc, r, c(stride)), kb);
      at = arith::AddIOp::create(b, loc, at, c(base));
      Value s = memref::LoadOp::create(b, loc, func.getArgument(operandB), j);
      memref::StoreOp::create(b, loc, arith::DivFOp::create(b, loc, one, s),
                              func.getArgument(2), at);
      first += rows * cols;
    }
    b.setInsertionPointToEnd(&func.getBody().front());
    gpu::ReturnOp::create(b, loc);
  }
}

} // namespace

void addGemmBlockFactorKernels(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  ctx->getOrLoadDialect<gpu::GPUDialect>();
  ctx->getOrLoadDialect<arith::ArithDialect>();
  ctx->getOrLoadDialect<memref::MemRefDialect>();
  ctx->getOrLoadDialect<scf::SCFDialect>();
  bool blocks = false;
  module.walk([&](kernel::GemmOp gemm) {
    blocks |= gemm.getABlock() && !plan::takesBlockFactors(gemm);
  });
  if (!blocks)
    return;
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(ctx));
  addBlockFactorKernels(module);
}

FailureOr<CodegenOutcome> runCodegen(ModuleOp module,
                                     const CodegenPipelineOptions &options) {
  CodegenOutcome outcome;
  std::vector<std::pair<Location, std::string>> diagnostics;
  {
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << d;
      diagnostics.emplace_back(d.getLocation(), std::move(text));
      return success();
    });
    PassManager pm(module.getContext());
    buildCodegenPipeline(pm, options);
    // Which pass failed, for the error below.
    struct FailedPass : PassInstrumentation {
      std::string *name;
      explicit FailedPass(std::string *name) : name(name) {}
      void runAfterPassFailed(Pass *pass, Operation *) override {
        *name = pass->getArgument().str();
      }
    };
    std::string failedPass;
    pm.addInstrumentation(std::make_unique<FailedPass>(&failedPass));
    if (failed(pm.run(module))) {
      for (auto &[loc, text] : diagnostics)
        llvm::errs() << loc << ": " << text << "\n";
      module.emitError("bundle: GPU codegen failed in pass '")
          << failedPass << "'";
      return failure();
    }
  }
  // A diagnostic belongs to an op without kernels when it is about that op
  // (its name, at its location) or about an op inside its region.
  module.walk([&](Operation *op) {
    auto launched = dyn_cast<kernel::LaunchedOpInterface>(op);
    if (!isa_and_nonnull<func::FuncOp>(op->getParentOp()) ||
        (launched && launched.hasLaunches()))
      return;
    llvm::DenseSet<Location> inside;
    op->walk([&](Operation *inner) {
      if (inner != op)
        inside.insert(inner->getLoc());
    });
    std::string own = "'" + op->getName().getStringRef().str() + "' op";
    std::string reason;
    llvm::StringSet<> said;
    for (auto &[loc, text] : diagnostics)
      if (((loc == op->getLoc() && llvm::StringRef(text).starts_with(own)) ||
           inside.contains(loc)) &&
          said.insert(text).second)
        reason += (reason.empty() ? "" : "; ") + text;
    if (!reason.empty())
      outcome.reasons[op] = reason;
  });
  return outcome;
}

namespace {

// ptxas: the one asked for, else CUDA_HOME's, PATH's, the default install's.
std::string findAssembler(StringRef requested) {
  if (requested == "none")
    return "";
  if (!requested.empty())
    return requested.str();
  std::vector<std::string> folders;
  if (const char *home = std::getenv("CUDA_HOME"))
    folders.push_back(std::string(home) + "/bin");
  if (auto onPath = llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  folders.push_back("/usr/local/cuda/bin");
  for (const std::string &folder : folders) {
    std::string candidate = folder + "/ptxas";
    if (llvm::sys::fs::can_execute(candidate))
      return candidate;
  }
  return "";
}

// Runs `args` with stdout sent to `out`; returns the exit code.
int execute(StringRef program, ArrayRef<StringRef> args, StringRef out,
            std::string &error) {
  std::optional<StringRef> redirects[] = {std::nullopt, out, out};
  return llvm::sys::ExecuteAndWait(program, args, std::nullopt, redirects, 0, 0,
                                   &error);
}

FailureOr<std::string> readFile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return failure();
  return (*buffer)->getBuffer().str();
}

// "ptxas release 13.0, V13.0.88": the version line of `ptxas --version`.
std::string assemblerVersion(StringRef ptxas, Operation *at) {
  SmallString<128> log;
  llvm::sys::fs::createTemporaryFile("octet-ptxas", "txt", log);
  std::string error;
  execute(ptxas, {ptxas, "--version"}, log, error);
  FailureOr<std::string> text = readFile(log);
  llvm::sys::fs::remove(log);
  if (failed(text))
    return "ptxas";
  StringRef s(*text);
  size_t pos = s.find("release ");
  if (pos == StringRef::npos) {
    at->emitWarning("cannot read the version of ") << ptxas;
    return "ptxas";
  }
  return ("ptxas " + s.drop_front(pos).split('\n').first.trim()).str();
}

} // namespace

FailureOr<KernelModules> collectModules(ModuleOp module, StringRef ptxasPath) {
  KernelModules out;
  std::string ptxas = findAssembler(ptxasPath);
  out.assembler = ptxas.empty() ? "none" : assemblerVersion(ptxas, module);
  SmallString<128> folder;
  if (!ptxas.empty()) {
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("octet-cubins", folder))
      return module.emitError("cannot create a temporary folder for ptxas: ")
             << ec.message();
  }
  auto cleanup = llvm::make_scope_exit([&] {
    if (!folder.empty())
      llvm::sys::fs::remove_directories(folder);
  });
  // The modules' PTX, then one ptxas a distinct PTX (modules of the same
  // code, a model's every transpose of one shape, say, are assembled once),
  // as many at once as the machine has cores: ptxas is most of the time a
  // large model's bundle takes.
  struct Assembly {
    Operation *binary;
    std::string chip, ptx, cubin, log, error;
    int rc = 0;
  };
  std::vector<Assembly> assemblies;
  std::map<std::pair<std::string, std::string>, size_t> assemblyOf;
  std::vector<size_t> moduleAssembly;
  for (auto binary : module.getOps<gpu::BinaryOp>()) {
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      if (object.getFormat() != gpu::CompilationTarget::Assembly)
        return binary.emitError("bundle: expected PTX from "
                                "gpu-module-to-binary{format=isa}");
      bundle::Module m;
      m.set_name(binary.getName().str());
      m.set_ptx(object.getObject().getValue().str());
      std::string chip = "sm_90a";
      if (auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget()))
        chip = target.getChip().str();
      if (!ptxas.empty()) {
        auto [it, added] =
            assemblyOf.try_emplace({chip, m.ptx()}, assemblies.size());
        if (added) {
          Assembly a{binary, chip};
          SmallString<128> ptx(folder), cubin(folder), log(folder);
          llvm::sys::path::append(ptx, m.name() + ".ptx");
          llvm::sys::path::append(cubin, m.name() + ".cubin");
          llvm::sys::path::append(log, m.name() + ".log");
          std::error_code ec;
          llvm::raw_fd_ostream os(ptx, ec);
          if (ec)
            return binary.emitError("cannot write ") << ptx << ": "
                                                     << ec.message();
          os << m.ptx();
          a.ptx = ptx.str().str(), a.cubin = cubin.str().str();
          a.log = log.str().str();
          assemblies.push_back(std::move(a));
        }
        moduleAssembly.push_back(it->second);
      }
      out.index[m.name()] = out.modules.size();
      out.modules.push_back(std::move(m));
    }
  }
  if (ptxas.empty())
    return out;
  {
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency());
    for (Assembly &a : assemblies)
      pool.async([&ptxas, &a] {
        std::string arch = "-arch=" + a.chip;
        a.rc = execute(ptxas, {ptxas, arch, "-O3", a.ptx, "-o", a.cubin},
                       a.log, a.error);
      });
    pool.wait();
  }
  std::vector<std::string> cubins;
  for (Assembly &a : assemblies) {
    auto *binary = a.binary;
    StringRef name = cast<gpu::BinaryOp>(binary).getName();
    if (a.rc != 0) {
      FailureOr<std::string> said = readFile(a.log);
      return binary->emitError("ptxas rejected the PTX of kernel module '")
             << name << "' (exit " << a.rc << "): "
             << (succeeded(said) ? *said : a.error);
    }
    FailureOr<std::string> bytes = readFile(a.cubin);
    if (failed(bytes))
      return binary->emitError("ptxas wrote no cubin for ") << name;
    cubins.push_back(std::move(*bytes));
  }
  for (auto [m, a] : llvm::zip(out.modules, moduleAssembly)) {
    m.set_cubin(cubins[a]);
    m.set_cubin_arch(assemblies[a].chip);
  }
  return out;
}

} // namespace octet::emit
