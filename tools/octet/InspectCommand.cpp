// octet inspect: what a .octet bundle holds, through the same reports
// octet-run prints, so a bundle can be read on a machine with no GPU.

#include "bundle/Bundle.h"
#include "bundle/Describe.h"
#include "tools/octet/Commands.h"
#include "tools/octet/CommandErrors.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

namespace octet {
namespace {

void printHelp(std::FILE *out) {
  std::fprintf(
      out,
      "usage: octet inspect BUNDLE.octet [--all-slots] [--modules DIR]\n\n"
      "Prints how the bundle was built (format and compiler versions, spec,\n"
      "options, content hash), the precision table, the memory plan, the\n"
      "kernels and GEMMs, and the programs of each rank. Kernels marked\n"
      "[no code] keep octet-run from running the bundle.\n\n"
      "options:\n"
      "  --all-slots   list every slot of the memory plan, not the largest\n"
      "  --modules DIR write each kernel module as DIR/<module>.ptx, and\n"
      "                DIR/<module>.cubin where the bundle has one\n"
      "  -h, --help    this text\n");
}

int usageError(const std::string &message) {
  return reportUsageError("inspect", message);
}

// The bundle's code as files, to read, assemble or disassemble.
Status writeModules(const bundle::Bundle &b, const std::string &dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return Status::error(dir + ": cannot create: " + ec.message());
  auto write = [&](const std::string &name, const std::string &bytes) {
    std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    return out ? Status::ok()
               : Status::error(path + ": cannot write (disk full?)");
  };
  for (const bundle::Module &m : b.modules()) {
    if (!m.ptx().empty())
      OCTET_RETURN_IF_ERROR(write(m.name() + ".ptx", m.ptx()));
    if (!m.cubin().empty())
      OCTET_RETURN_IF_ERROR(write(m.name() + ".cubin", m.cubin()));
  }
  return Status::ok();
}

} // namespace

int runInspectCommand(int argc, char **argv) {
  std::string path, modulesDir;
  bool allSlots = false;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      printHelp(stdout);
      return 0;
    }
    if (arg == "--all-slots")
      allSlots = true;
    else if (arg == "--modules") {
      if (i + 1 >= argc)
        return usageError("--modules needs a folder");
      modulesDir = argv[++i];
    }
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
  if (!modulesDir.empty())
    if (Status st = writeModules(*b, modulesDir); !st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
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
