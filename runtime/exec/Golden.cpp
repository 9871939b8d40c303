#include "runtime/exec/Golden.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace octet::golden {

Tolerances tolerancesFor(const std::string &numerics) {
  if (numerics == "fp8")
    return {/*loss=*/2e-3, /*gradNorm=*/2e-2, /*growth=*/0.1,
            /*tensor=*/0.5, /*tensorNorm=*/5e-2};
  return {/*loss=*/1e-3, /*gradNorm=*/5e-3, /*growth=*/0.1,
          /*tensor=*/2e-2, /*tensorNorm=*/2e-2};
}

bool comparedAsSquareRoot(const std::string &name) {
  return name.rfind("adam_v.", 0) == 0;
}

Tolerances slotTolerances(const Tolerances &tol, const std::string &name) {
  Tolerances t = tol;
  if (name.rfind("fp8.", 0) == 0) {
    // An amax is one element, and the scale follows it.
    t.tensor = t.tensorNorm = kFp8StateTolerance;
  }
  return t;
}

uint64_t sampleStride(uint64_t elements) {
  if (elements <= kMaxSamples)
    return 1;
  return ((elements + kMaxSamples - 1) / kMaxSamples) | 1;
}

uint64_t sampleCount(uint64_t elements) {
  uint64_t stride = sampleStride(elements);
  return (elements + stride - 1) / stride;
}

uint64_t fnv1a64(const void *data, size_t bytes) {
  const auto *p = static_cast<const uint8_t *>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string batchTensorName(int64_t step, int64_t micro,
                            const std::string &input) {
  return "step" + std::to_string(step) + ".micro" + std::to_string(micro) +
         "." + input;
}

namespace {

std::string path(const std::string &dir, const std::string &file) {
  return dir + "/" + file;
}

Status writeText(const std::string &file, const std::string &text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out)
    return Status::error(file + ": cannot write");
  return Status::ok();
}

StatusOr<std::vector<std::vector<std::string>>>
readRows(const std::string &file, size_t fields) {
  std::ifstream in(file);
  if (!in)
    return Status::error(file + ": cannot read; is the golden directory "
                                "complete (`octet golden` writes it)?");
  std::vector<std::vector<std::string>> rows;
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty() || line[0] == '#')
      continue;
    std::vector<std::string> row;
    std::istringstream fieldsIn(line);
    std::string field;
    while (std::getline(fieldsIn, field, '\t'))
      row.push_back(field);
    if (row.size() != fields)
      return Status::error(file + ":" + std::to_string(lineNo) + ": " +
                           std::to_string(row.size()) +
                           " tab-separated fields; expected " +
                           std::to_string(fields));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

} // namespace

Status writeInfo(const std::string &dir, const Info &info) {
  std::string text = "# key\tvalue\n";
  for (const auto &[k, v] : info.values)
    text += k + "\t" + v + "\n";
  return writeText(path(dir, kInfoFile), text);
}

StatusOr<Info> readInfo(const std::string &dir) {
  auto rows = readRows(path(dir, kInfoFile), 2);
  if (!rows)
    return rows.status();
  Info info;
  for (auto &r : *rows)
    info.values[r[0]] = r[1];
  return info;
}

Status writeSteps(const std::string &dir,
                  const std::vector<StepValues> &steps) {
  std::string text = "# step\tloss\tgrad_norm\tlr\n";
  for (const StepValues &s : steps)
    text += std::to_string(s.step) + "\t" + number(s.loss) + "\t" +
            number(s.gradNorm) + "\t" + number(s.lr) + "\n";
  return writeText(path(dir, kStepsFile), text);
}

StatusOr<std::vector<StepValues>> readSteps(const std::string &dir) {
  auto rows = readRows(path(dir, kStepsFile), 4);
  if (!rows)
    return rows.status();
  std::vector<StepValues> steps;
  for (auto &r : *rows)
    steps.push_back({std::stoll(r[0]), std::stod(r[1]), std::stod(r[2]),
                     std::stod(r[3])});
  return steps;
}

Status writeInitHashes(
    const std::string &dir,
    const std::map<std::string, std::pair<uint64_t, uint64_t>> &hashes) {
  std::string text = "# name\tbytes\tfnv1a64\n";
  for (const auto &[name, h] : hashes)
    text += name + "\t" + std::to_string(h.first) + "\t" +
            std::to_string(h.second) + "\n";
  return writeText(path(dir, kInitFile), text);
}

StatusOr<std::map<std::string, std::pair<uint64_t, uint64_t>>>
readInitHashes(const std::string &dir) {
  auto rows = readRows(path(dir, kInitFile), 3);
  if (!rows)
    return rows.status();
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  for (auto &r : *rows)
    out[r[0]] = {std::stoull(r[1]), std::stoull(r[2])};
  return out;
}

Status writeSnapshot(const std::string &dir, const std::string &name,
                     const std::vector<SlotSummary> &slots) {
  std::string text = "# slot\telements\tl2\tmax_abs\n";
  hf::SafetensorsWriter writer;
  for (const SlotSummary &s : slots) {
    text += s.name + "\t" + std::to_string(s.elements) + "\t" + number(s.l2) +
            "\t" + number(s.maxAbs) + "\n";
    OCTET_RETURN_IF_ERROR(
        writer.addView(s.name, DType::F32, {int64_t(s.samples.size())},
                       s.samples.data(), s.samples.size() * sizeof(float)));
  }
  OCTET_RETURN_IF_ERROR(writeText(path(dir, name + ".tsv"), text));
  return writer.write(path(dir, name + ".safetensors"));
}

StatusOr<std::map<std::string, SlotSummary>>
readSnapshot(const std::string &dir, const std::string &name) {
  auto rows = readRows(path(dir, name + ".tsv"), 4);
  if (!rows)
    return rows.status();
  auto file = hf::SafetensorsFile::open(path(dir, name + ".safetensors"));
  if (!file)
    return file.status();
  std::map<std::string, SlotSummary> out;
  for (auto &r : *rows) {
    SlotSummary s;
    s.name = r[0];
    s.elements = std::stoull(r[1]);
    s.l2 = std::stod(r[2]);
    s.maxAbs = std::stod(r[3]);
    auto bytes = file->readTensor(s.name);
    if (!bytes)
      return bytes.status();
    if (bytes->size() != sampleCount(s.elements) * sizeof(float))
      return Status::error(file->path() + ": '" + s.name + "' has " +
                           std::to_string(bytes->size()) +
                           " bytes of samples; its " +
                           std::to_string(s.elements) + " elements give " +
                           std::to_string(sampleCount(s.elements)) +
                           " f32 samples");
    s.samples.resize(bytes->size() / sizeof(float));
    std::memcpy(s.samples.data(), bytes->data(), bytes->size());
    out[s.name] = std::move(s);
  }
  return out;
}

double relativeL2(const std::vector<float> &a, const std::vector<float> &b) {
  double diff = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    double x = a[i], y = b[i];
    if (std::isnan(x) != std::isnan(y) || std::isinf(x) || std::isinf(y))
      return INFINITY;
    diff += (x - y) * (x - y);
    na += x * x;
    nb += y * y;
  }
  double scale = std::sqrt(std::max(na, nb));
  return scale == 0 ? 0 : std::sqrt(diff) / scale;
}

double relativeError(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b))
    return a == b ? 0 : INFINITY;
  double scale = std::max(std::fabs(a), std::fabs(b));
  return scale == 0 ? 0 : std::fabs(a - b) / scale;
}

} // namespace octet::golden
