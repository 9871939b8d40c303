// octet-opt: runs any octet or upstream pass on a .mlir file, as mlir-opt does.

#include "compiler/Registration.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  octet::registerCompilerDialects(registry);
  octet::registerCompilerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "octet optimizer driver\n", registry));
}
