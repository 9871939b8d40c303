// octet-attention-golden: the reference interpreter's answers for one
// function of an attention test file (a kernel.attention_fwd followed by the
// kernel.attention_bwd of its output), on seeded random inputs, for the GPU
// test of the generated attention kernels (octet-gpu-attention-tests
// --golden), which links no MLIR.
//
// usage: octet-attention-golden INPUT.mlir FUNCTION --out DIR [--seed N]
//
// The function's arguments are q, k, v, dO [, cu_seqlens]; its results out,
// lse, dq, dk, dv. Writes DIR/<name>.bin for every argument and result
// (little-endian f32 values, i32 for cu_seqlens; bf16 tensors hold values
// exact in bf16) and DIR/golden.json: the file names and shapes, and the
// names kernels.json gives the function's two attention ops (kind and index
// among the file's attention ops, as octet-emit-ptx counts them).

#include "compiler/Interpreter/Interpreter.h"
#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <random>

using namespace mlir;
using namespace octet;
using interp::Tensor;
using octet::DType;

namespace {

[[noreturn]] void die(const std::string &message) {
  llvm::errs() << "octet-attention-golden: " << message << "\n";
  std::exit(1);
}

void writeTensor(const std::string &path, const Tensor &t) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    die("cannot write " + path + ": " + ec.message());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloat(t.dtype())) {
      float x = t.f()[i];
      os.write(reinterpret_cast<const char *>(&x), 4);
    } else {
      int32_t x = static_cast<int32_t>(t.i()[i]);
      os.write(reinterpret_cast<const char *>(&x), 4);
    }
  }
}

llvm::json::Object describe(const std::string &name, const Tensor &t) {
  llvm::json::Array shape;
  for (int64_t d = 0; d < t.rank(); ++d)
    shape.push_back(t.dim(d));
  return llvm::json::Object{{"name", name},
                            {"file", name + ".bin"},
                            {"dtype", dtypeName(t.dtype())},
                            {"shape", std::move(shape)}};
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 5 || std::string(argv[3]) != "--out")
    die("usage: octet-attention-golden INPUT.mlir FUNCTION --out DIR "
        "[--seed N]");
  std::string input = argv[1], function = argv[2], dir = argv[4];
  unsigned seed = argc > 6 && std::string(argv[5]) == "--seed"
                      ? static_cast<unsigned>(std::stoul(argv[6]))
                      : 2024u;
  MLIRContext context;
  context.loadDialect<func::FuncDialect, graph::GraphDialect,
                      kernel::KernelDialect, fp8::Fp8Dialect>();
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(input, &context);
  if (!module)
    die("cannot parse " + input);
  auto func = module->lookupSymbol<func::FuncOp>(function);
  if (!func)
    die(input + " has no function '" + function + "'");

  // The names kernels.json gives the function's attention ops.
  std::string fwdName, bwdName;
  int index = 0;
  module->walk([&](Operation *op) {
    if (!isa<kernel::AttentionFwdOp, kernel::AttentionBwdOp>(op))
      return;
    std::string name =
        op->getName().stripDialect().str() + "_" + std::to_string(index++);
    if (op->getParentOfType<func::FuncOp>() == func)
      (isa<kernel::AttentionFwdOp>(op) ? fwdName : bwdName) = name;
  });
  if (fwdName.empty() || bwdName.empty())
    die("function '" + function +
        "' needs a kernel.attention_fwd and a kernel.attention_bwd");

  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<Tensor> inputs;
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    DType dtype = cantFail(interp::dtypeOf(type.getElementType()));
    Tensor t(dtype, std::vector<int64_t>(type.getShape()));
    if (isFloat(dtype)) {
      for (int64_t i = 0; i < t.numel(); ++i)
        t.f()[i] = normal(rng);
      t.roundToType();
    } else {
      // cu_seqlens over the B·S tokens of q: sorted random cuts.
      auto q = cast<RankedTensorType>(func.getArgument(0).getType());
      int64_t tokens = q.getDimSize(0) * q.getDimSize(1);
      std::uniform_int_distribution<int64_t> pick(0, tokens);
      std::vector<int64_t> cuts(t.numel());
      for (int64_t &c : cuts)
        c = pick(rng);
      cuts.front() = 0;
      cuts.back() = tokens;
      std::sort(cuts.begin(), cuts.end());
      std::copy(cuts.begin(), cuts.end(), t.i());
    }
    inputs.push_back(std::move(t));
  }
  interp::VariableStore variables;
  interp::Interpreter interpreter(*module);
  auto outputs = interpreter.run(function, inputs, variables);
  if (!outputs)
    die("the interpreter failed: " + llvm::toString(outputs.takeError()));
  if (outputs->size() != 5)
    die("function '" + function + "' must return out, lse, dq, dk, dv");

  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    die("cannot create " + dir + ": " + ec.message());
  static const char *inputNames[] = {"q", "k", "v", "dout", "cu_seqlens"};
  static const char *outputNames[] = {"out", "lse", "dq", "dk", "dv"};
  llvm::json::Array inputList, outputList;
  for (size_t i = 0; i < inputs.size(); ++i) {
    writeTensor(dir + "/" + inputNames[i] + ".bin", inputs[i]);
    inputList.push_back(describe(inputNames[i], inputs[i]));
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    writeTensor(dir + "/" + outputNames[i] + ".bin", (*outputs)[i]);
    outputList.push_back(describe(outputNames[i], (*outputs)[i]));
  }
  llvm::json::Object golden{{"source", input},
                            {"function", function},
                            {"seed", (int64_t)seed},
                            {"forward", fwdName},
                            {"backward", bwdName},
                            {"inputs", std::move(inputList)},
                            {"outputs", std::move(outputList)}};
  std::error_code ec;
  llvm::raw_fd_ostream os(dir + "/golden.json", ec);
  if (ec)
    die("cannot write " + dir + "/golden.json: " + ec.message());
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(golden))) << "\n";
  llvm::outs() << "golden of " << function << " (" << fwdName << ", "
               << bwdName << "), seed " << seed << ", in " << dir << "\n";
  return 0;
}
