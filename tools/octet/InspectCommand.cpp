// octet inspect: what a .octet bundle holds, through the same reports
// octet-run prints, so a bundle can be read on a machine with no GPU.

#include "runtime/bundle/Bundle.h"
#include "runtime/bundle/Describe.h"
#include "tools/octet/Commands.h"
#include "tools/octet/CommandErrors.h"

#include "llvm/ADT/StringRef.h"

#include <cstdio>
#include <iostream>
#include <string>

namespace octet {
namespace {

void printHelp(std::FILE *out) {
  std::fprintf(
      out,
      "usage: octet inspect BUNDLE.octet [--all-slots]\n\n"
      "Prints how the bundle was built (format and compiler versions, spec,\n"
      "options, content hash), the precision table, the memory plan, the\n"
      "kernels and GEMMs, and the programs of each rank. Kernels marked\n"
      "[no code] keep octet-run from running the bundle.\n\n"
      "options:\n"
      "  --all-slots   list every slot of the memory plan, not the largest\n"
      "  -h, --help    this text\n");
}

int usageError(const std::string &message) {
  return reportUsageError("inspect", message);
}

} // namespace

int runInspectCommand(int argc, char **argv) {
  std::string path;
  bool allSlots = false;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      printHelp(stdout);
      return 0;
    }
    if (arg == "--all-slots")
      allSlots = true;
    else if (arg.starts_with("-"))
      return usageError("unknown option '" + arg.str() + "'");
    else if (path.empty())
      path = arg.str();
    else
      return usageError("one BUNDLE only; got '" + path + "' and '" +
                        arg.str() + "'");
  }
  if (path.empty())
    return usageError("missing BUNDLE (a .octet file from octet compile -o)");
  StatusOr<bundle::Bundle> b = bundle::readBundle(path);
  if (!b) {
    std::fprintf(stderr, "%s\n", b.status().message().c_str());
    return 1;
  }
  bundle::describeBuild(*b, std::cout);
  bundle::describePrecision(*b, std::cout);
  bundle::describePlan(*b, std::cout, allSlots ? 0 : 12);
  bundle::describeKernels(*b, std::cout);
  bundle::describePrograms(*b, std::cout);
  if (Status runnable = bundle::checkRunnable(*b); !runnable)
    std::cout << "not runnable: " << runnable.message() << "\n";
  return 0;
}

} // namespace octet
