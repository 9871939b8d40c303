#include "compiler/Emit/KernelModules.h"

#include "compiler/Pipelines/Pipelines.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
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
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace octet::emit {

void addGemmScaleKernel(ModuleOp module) {
  bool scaled = false;
  module.walk([&](kernel::GemmOp gemm) { scaled |= bool(gemm.getAScale()); });
  if (!scaled || module.lookupSymbol(kGemmScaleKernel))
    return;
  MLIRContext *ctx = module.getContext();
  ctx->getOrLoadDialect<gpu::GPUDialect>();
  ctx->getOrLoadDialect<arith::ArithDialect>();
  ctx->getOrLoadDialect<memref::MemRefDialect>();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(ctx));
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, kGemmScaleKernel);
  b.setInsertionPointToStart(gpuModule.getBody());
  // Global memory (address space 1), one f32 each, as the fused kernels
  // take their buffers.
  auto scalar = MemRefType::get({1}, b.getF32Type(), MemRefLayoutAttrInterface(),
                                b.getI64IntegerAttr(1));
  auto func = gpu::GPUFuncOp::create(
      b, loc, kGemmScaleKernel,
      b.getFunctionType({scalar, scalar, scalar}, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  b.setInsertionPointToStart(&func.getBody().front());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value sa = memref::LoadOp::create(b, loc, func.getArgument(0), zero);
  Value sb = memref::LoadOp::create(b, loc, func.getArgument(1), zero);
  // As the interpreter: the product rounded to f32, then its reciprocal
  // (fdiv without fast-math flags is div.rn.f32: correctly rounded).
  Value product = arith::MulFOp::create(b, loc, sa, sb);
  Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
  Value inverse = arith::DivFOp::create(b, loc, one, product);
  memref::StoreOp::create(b, loc, inverse, func.getArgument(2), zero);
  gpu::ReturnOp::create(b, loc);
}

FailureOr<CodegenOutcome> runCodegen(ModuleOp module) {
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
    buildCodegenPipeline(pm, keepGoingCodegenOptions());
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
        SmallString<128> ptx(folder), cubin(folder), log(folder);
        llvm::sys::path::append(ptx, m.name() + ".ptx");
        llvm::sys::path::append(cubin, m.name() + ".cubin");
        llvm::sys::path::append(log, m.name() + ".log");
        std::error_code ec;
        {
          llvm::raw_fd_ostream os(ptx, ec);
          if (ec)
            return binary.emitError("cannot write ") << ptx << ": "
                                                     << ec.message();
          os << m.ptx();
        }
        std::string arch = "-arch=" + chip, error;
        int rc = execute(ptxas, {ptxas, arch, "-O3", ptx, "-o", cubin}, log,
                         error);
        if (rc != 0) {
          FailureOr<std::string> said = readFile(log);
          return binary.emitError("ptxas rejected the PTX of kernel module '")
                 << m.name() << "' (exit " << rc << "): "
                 << (succeeded(said) ? *said : error);
        }
        FailureOr<std::string> bytes = readFile(cubin);
        if (failed(bytes))
          return binary.emitError("ptxas wrote no cubin for ") << m.name();
        m.set_cubin(std::move(*bytes));
        m.set_cubin_arch(chip);
      }
      out.index[m.name()] = out.modules.size();
      out.modules.push_back(std::move(m));
    }
  }
  return out;
}

} // namespace octet::emit
