// octet export-hf: a Hugging Face checkpoint through octet's parameters and
// back out, optionally in another dtype or shard size; and the shared
// pieces of `octet train --init-from`.

#include "compiler/Checkpoint/HfCheckpoint.h"
#include "compiler/Registration.h"
#include "frontends/GraphImporter.h"
#include "hf/HfCheckpoint.h"
#include "hf/HfConfig.h"
#include "spec/SpecReader.h"
#include "tools/octet/CommandErrors.h"
#include "tools/octet/Commands.h"
#include "tools/octet/HfInit.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mlir;

namespace octet {

namespace {

void printHelp(std::FILE *out) {
  std::fprintf(
      out,
      "usage: octet export-hf [MODEL] --init-from HF --out DIR [--dtype D]\n"
      "                       [--max-shard-size SIZE]\n\n"
      "Loads the Hugging Face checkpoint HF (a directory with "
      "model.safetensors,\n"
      "or model.safetensors.index.json and its shards) into the parameters of "
      "MODEL,\n"
      "checking every tensor's name, shape and dtype against the graph, and "
      "writes\n"
      "them back out under their HF names, with a config.json.\n\n"
      "  MODEL              a .pbtxt spec or a HF config.json (default: "
      "HF/config.json)\n"
      "  --dtype D          source (default: each tensor as it came, so the "
      "export\n"
      "                     equals the input bit for bit), f32, bf16 or f16 "
      "(round to\n"
      "                     nearest even)\n"
      "  --max-shard-size SIZE   bytes per safetensors file, e.g. 200KB, "
      "5GB\n"
      "                     (default 5GB); more make shards and an index\n");
}

int usageError(const std::string &message) {
  return reportUsageError("export-hf", message);
}

int inputError(const std::string &message) {
  return reportInputError("export-hf", message);
}

bool parseSize(llvm::StringRef text, uint64_t &bytes) {
  uint64_t unit = 1;
  for (auto [suffix, factor] : {std::pair<const char *, uint64_t>{"KB", 1000},
                                {"MB", 1000000},
                                {"GB", 1000000000},
                                {"KiB", 1024},
                                {"MiB", 1 << 20},
                                {"GiB", 1ull << 30}})
    if (text.consume_back(suffix)) {
      unit = factor;
      break;
    }
  if (text.empty() || text.getAsInteger(10, bytes) || bytes == 0)
    return false;
  bytes *= unit;
  return true;
}

StatusOr<spec::Spec> loadModel(const std::string &path) {
  if (llvm::StringRef(path).ends_with(".json"))
    return hf::readHfConfigAsSpec(path);
  return spec::loadSpecFile(path);
}

} // namespace

StatusOr<hf::HfLoadSummary> initFromHf(const spec::Spec &spec,
                                       const std::string &specSource,
                                       const std::string &hfDir,
                                       ModuleOp module,
                                       interp::VariableStore &store) {
  if (Status s = hf::checkConfigBeside(spec.model(), specSource, hfDir); !s)
    return s;
  StatusOr<hf::HfLoadSummary> summary = loadHfCheckpoint(hfDir, module, store);
  if (!summary)
    return summary.status();
  std::printf("init: %s\n", hf::describeLoad(*summary).c_str());
  return summary;
}

StatusOr<size_t> saveHf(const spec::Spec &spec, const std::string &configSource,
                        const std::string &outDir, ModuleOp module,
                        const interp::VariableStore &store,
                        hf::HfExportOptions options) {
  StatusOr<std::string> config =
      hf::exportConfigJson(spec.model(), configSource);
  if (!config)
    return config.status();
  options.configJson = *config;
  return exportHfCheckpoint(outDir, module, store, options);
}

int runExportHfCommand(int argc, char **argv) {
  std::string model, hfDir, outDir, dtype = "source";
  uint64_t maxShard = 5000000000ull;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    auto value = [&](llvm::StringRef flag, std::string &out) -> bool {
      if (arg == flag && i + 1 < argc) {
        out = argv[++i];
        return true;
      }
      if (arg.starts_with((flag + "=").str())) {
        out = arg.drop_front(flag.size() + 1).str();
        return true;
      }
      return false;
    };
    std::string text;
    if (arg == "--help" || arg == "-h") {
      printHelp(stdout);
      return 0;
    } else if (value("--init-from", hfDir) || value("--out", outDir) ||
               value("--dtype", dtype)) {
    } else if (value("--max-shard-size", text)) {
      if (!parseSize(text, maxShard))
        return usageError("--max-shard-size takes a size such as 200KB or "
                          "5GB; got '" +
                          text + "'");
    } else if (arg.starts_with("-")) {
      return usageError("unknown option '" + arg.str() + "'");
    } else if (model.empty()) {
      model = arg.str();
    } else {
      return usageError("one MODEL only; got '" + model + "' and '" +
                        arg.str() + "'");
    }
  }
  if (hfDir.empty())
    return usageError("missing --init-from HF (the checkpoint to load)");
  if (outDir.empty())
    return usageError("missing --out DIR");
  if (model.empty())
    model = hf::configBeside(hfDir);

  hf::HfExportOptions options;
  options.maxShardBytes = maxShard;
  bool keepDTypes = dtype == "source";
  if (dtype == "f32" || keepDTypes)
    options.defaultDType = DType::F32;
  else if (dtype == "bf16")
    options.defaultDType = DType::BF16;
  else if (dtype == "f16")
    options.defaultDType = DType::F16;
  else
    return usageError("--dtype is source, f32, bf16 or f16; got '" + dtype +
                      "'");

  StatusOr<spec::Spec> spec = loadModel(model);
  if (!spec)
    return inputError(spec.status().message());
  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  auto module = importForwardGraph(context, *spec);
  if (!module)
    return inputError(module.status().withContext(model).message());
  ModuleOp m = **module;
  interp::VariableStore store;
  StatusOr<hf::HfLoadSummary> loaded =
      initFromHf(*spec, model, hfDir, m, store);
  if (!loaded)
    return inputError(loaded.status().message());
  if (keepDTypes)
    options.dtypes = loaded->dtypes;
  StatusOr<size_t> written =
      saveHf(*spec, hf::configBeside(hfDir), outDir, m, store, options);
  if (!written)
    return inputError(written.status().message());
  std::printf("export: %zu tensors (%s) -> %s\n", *written, dtype.c_str(),
              outDir.c_str());
  return 0;
}

} // namespace octet
