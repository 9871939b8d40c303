// octet export-hf: a Hugging Face checkpoint through octet's parameters and
// back out, optionally in another dtype or shard size; and the shared
// pieces of `octet train --init-from`.

#include "compiler/Checkpoint/HfCheckpoint.h"
#include "compiler/Registration.h"
#include "frontends/GraphImporter.h"
#include "hf/HfCheckpoint.h"
#include "hf/HfConfig.h"
#include "spec/SpecReader.h"
#include "support/AtomicFile.h"
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

int inputError(const std::string &message) {
  return reportInputError("export-hf", message);
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

int runExportHfCommand(const ExportHfOptions &opts) {
  if (Status st = checkExportHfInputs(opts); !st)
    return inputError(st.message());
  const std::string &hfDir = opts.initFrom, &outDir = opts.out,
                    &dtype = opts.dtype;
  uint64_t maxShard = opts.maxShardBytes;
  std::string model = opts.model;
  if (model.empty()) {
    model = hf::configBeside(hfDir);
    if (!isRegularFile(model))
      return inputError("--init-from " + hfDir +
                        ": no config.json says what model it holds (looked "
                        "for " + model + "); name the model first: `octet "
                        "export-hf MODEL --init-from " + hfDir + " -o " +
                        outDir + "`, MODEL a .pbtxt spec or the model's HF "
                        "config.json");
  }

  hf::HfExportOptions options;
  options.maxShardBytes = maxShard;
  bool keepDTypes = dtype == "source";
  if (dtype == "f32" || keepDTypes)
    options.defaultDType = DType::F32;
  else if (dtype == "bf16")
    options.defaultDType = DType::BF16;
  else if (dtype == "f16")
    options.defaultDType = DType::F16;

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
