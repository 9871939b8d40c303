// octet-opt: runs any octet or upstream pass on a .mlir file, as mlir-opt does.
//
// Its command line is MLIR's (MlirOptMain, on llvm::cl), not CLI11 as the
// other octet tools' are: that is how mlir-opt-compatible tools take
// registered passes and pipelines with their options
// (--pass-pipeline=..., --octet-precision=recipe=...), and lit tests and
// users expect mlir-opt's flags.

#include "compiler/Registration.h"
#include "support/CommandLine.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  octet::registerCompilerDialects(registry);
  octet::registerCompilerPasses();
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "octet " << octet::cli::version() << "\n";
  });
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv,
      "octet optimizer driver: octet's and MLIR's passes on a .mlir file, "
      "with mlir-opt's command line (llvm::cl; the other octet tools use "
      "CLI11)\n",
      registry));
}
