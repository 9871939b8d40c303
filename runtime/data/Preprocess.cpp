#include "runtime/data/Preprocess.h"

#include "runtime/data/ChatTemplate.h"
#include "runtime/data/Jsonl.h"
#include "runtime/data/Progress.h"
#include "runtime/data/Tokenizer.h"

#include <zlib.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace octet::data {

namespace {

// Runs a function over [0, count) on a fixed set of threads. The threads
// live as long as the pool so their per-thread tokenizer caches stay warm
// from one batch to the next.
class WorkerPool {
public:
  explicit WorkerPool(unsigned threads) {
    for (unsigned t = 0; t < threads; ++t)
      workers_.emplace_back([this, t, threads] { loop(t, threads); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread &worker : workers_)
      worker.join();
  }
  void run(size_t count, const std::function<void(size_t)> &task) {
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = &task;
    count_ = count;
    busy_ = workers_.size();
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [this] { return busy_ == 0; });
    task_ = nullptr;
  }

private:
  void loop(unsigned index, unsigned stride) {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(size_t)> *task;
      size_t count;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_)
          return;
        seen = generation_;
        task = task_;
        count = count_;
      }
      for (size_t i = index; i < count; i += stride)
        (*task)(i);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0)
        done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t)> *task_ = nullptr;
  size_t count_ = 0, busy_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

// Reads lines from a plain or gzip-compressed file.
class LineReader {
public:
  static StatusOr<std::unique_ptr<LineReader>> open(const std::string &path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (!file)
      return Status::error("cannot open input " + path +
                           "; pass an existing .jsonl or .jsonl.gz file");
    gzbuffer(file, 1 << 18);
    auto reader = std::unique_ptr<LineReader>(new LineReader());
    reader->file_ = file;
    reader->path_ = path;
    return reader;
  }
  ~LineReader() {
    if (file_)
      gzclose(file_);
  }
  // False at the end of input.
  StatusOr<bool> next(std::string &line) {
    line.clear();
    while (true) {
      size_t newline = buffer_.find('\n', position_);
      if (newline != std::string::npos) {
        line.append(buffer_, position_, newline - position_);
        position_ = newline + 1;
        break;
      }
      line.append(buffer_, position_, std::string::npos);
      buffer_.resize(1 << 18);
      int n =
          gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
      if (n < 0) {
        int code = 0;
        return Status::error("cannot read " + path_ + ": " +
                             gzerror(file_, &code));
      }
      buffer_.resize(static_cast<size_t>(n));
      position_ = 0;
      if (n == 0) {
        if (line.empty() && atEnd_)
          return false;
        atEnd_ = true;
        if (line.empty())
          return false;
        break;
      }
    }
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (first_) {
      first_ = false;
      if (line.compare(0, 3, "\xEF\xBB\xBF") == 0)
        line.erase(0, 3); // a UTF-8 byte order mark
    }
    return true;
  }
  uint64_t bytesConsumed() const {
    return static_cast<uint64_t>(gzoffset(file_));
  }

private:
  LineReader() = default;
  gzFile file_ = nullptr;
  std::string path_, buffer_;
  size_t position_ = 0;
  bool atEnd_ = false, first_ = true;
};

struct LineResult {
  bool blank = false;
  bool chat = false;
  std::string error;
  std::vector<int32_t> tokens;
  std::vector<int32_t> lossMask; // chat records only
};

bool isBlank(const std::string &line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

uint64_t fileSize(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 ? static_cast<uint64_t>(info.st_size)
                                        : 0;
}

} // namespace

std::string lossMaskPrefixFor(const std::string &prefix) {
  return prefix + "_loss_mask";
}

StatusOr<PreprocessResult> preprocessJsonl(const PreprocessOptions &options) {
  StatusOr<Tokenizer> tokenizer = Tokenizer::fromFile(options.tokenizerPath);
  if (!tokenizer)
    return tokenizer.status();
  std::optional<int32_t> eodId;
  if (options.appendEod) {
    for (const std::string &name :
         options.eodToken.empty()
             ? std::vector<std::string>{"<|end_of_text|>", "<|endoftext|>"}
             : std::vector<std::string>{options.eodToken}) {
      eodId = tokenizer->tokenToId(name);
      if (eodId)
        break;
    }
    if (!eodId)
      return Status::error(
          options.eodToken.empty()
              ? "--append-eod: the tokenizer has neither <|end_of_text|> nor "
                "<|endoftext|>; name the end-of-document token with "
                "--eod-token"
              : "--eod-token: \"" + options.eodToken + "\" is not a token of " +
                    options.tokenizerPath);
  }
  StatusOr<Llama3ChatTemplate> chatTemplate =
      Llama3ChatTemplate::create(*tokenizer);

  StatusOr<std::unique_ptr<LineReader>> reader =
      LineReader::open(options.inputPath);
  if (!reader)
    return reader.status();

  PreprocessResult result;
  result.dtype = tokenDTypeForVocab(tokenizer->vocabSize());
  StatusOr<IndexedDatasetWriter> tokensOut =
      IndexedDatasetWriter::create(options.outputPrefix, result.dtype);
  if (!tokensOut)
    return tokensOut.status();
  std::optional<IndexedDatasetWriter> maskOut;

  unsigned threads = options.threads
                         ? options.threads
                         : std::max(1u, std::thread::hardware_concurrency());
  WorkerPool pool(threads);
  std::optional<ProgressDisplay> progress;
  if (options.showProgress && options.log)
    progress.emplace("preprocess " + options.inputPath,
                     fileSize(options.inputPath), options.log);

  std::vector<std::string> lines;
  std::vector<LineResult> results;
  uint64_t firstLineNumber = 1;
  const size_t kReportedSkips = 20;
  bool endOfInput = false;
  while (!endOfInput) {
    lines.clear();
    while (lines.size() < options.linesPerBatch) {
      std::string line;
      StatusOr<bool> more = (*reader)->next(line);
      if (!more)
        return more.status();
      if (!*more) {
        endOfInput = true;
        break;
      }
      lines.push_back(std::move(line));
    }
    results.assign(lines.size(), LineResult());
    std::function<void(size_t)> work = [&](size_t i) {
      LineResult &out = results[i];
      if (isBlank(lines[i])) {
        out.blank = true;
        return;
      }
      StatusOr<JsonlRecord> record = parseJsonlLine(lines[i], options.textKey);
      if (!record) {
        out.error = record.status().message();
        return;
      }
      if (record->kind == JsonlRecord::Kind::Text) {
        Status s =
            tokenizer->encodeInto(record->text, options.addBos, out.tokens);
        if (!s)
          out.error = s.message();
        else if (eodId)
          out.tokens.push_back(*eodId);
        return;
      }
      out.chat = true;
      if (!chatTemplate) {
        out.error = chatTemplate.status().message();
        return;
      }
      StatusOr<TokenizedSample> sample =
          chatTemplate->tokenize(record->messages);
      if (!sample) {
        out.error = sample.status().message();
        return;
      }
      out.tokens = std::move(sample->tokens);
      out.lossMask.assign(sample->lossMask.begin(), sample->lossMask.end());
    };
    pool.run(lines.size(), work);

    for (size_t i = 0; i < results.size(); ++i) {
      LineResult &r = results[i];
      uint64_t lineNumber = firstLineNumber + i;
      ++result.lines;
      if (r.blank)
        continue;
      if (!r.error.empty()) {
        std::string where =
            options.inputPath + ":" + std::to_string(lineNumber) + ": ";
        if (r.chat && !chatTemplate)
          return Status::error(where + r.error);
        if (options.onError == PreprocessOptions::OnError::Stop)
          return Status::error(where + r.error +
                               "; fix the line or pass --on-error=skip "
                               "(nothing was written)");
        if (options.log && result.skipped < kReportedSkips)
          std::fprintf(options.log, "%s%s (skipped)\n", where.c_str(),
                       r.error.c_str());
        ++result.skipped;
        continue;
      }
      if (r.chat && !maskOut) {
        // The first chat record: earlier text records train on every token.
        result.lossMaskPrefix = lossMaskPrefixFor(options.outputPrefix);
        StatusOr<IndexedDatasetWriter> created = IndexedDatasetWriter::create(
            result.lossMaskPrefix, TokenDType::UInt8);
        if (!created)
          return created.status();
        maskOut.emplace(std::move(*created));
        for (int32_t length : tokensOut->sequenceLengths()) {
          if (Status s = maskOut->addSequence(std::vector<int32_t>(length, 1));
              !s)
            return s;
          maskOut->endDocument();
        }
      }
      if (Status s = tokensOut->addSequence(r.tokens); !s)
        return s;
      tokensOut->endDocument();
      if (maskOut) {
        if (!r.chat)
          r.lossMask.assign(r.tokens.size(), 1);
        if (Status s = maskOut->addSequence(r.lossMask); !s)
          return s;
        maskOut->endDocument();
      }
      ++result.documents;
      result.chatDocuments += r.chat;
      result.tokens += r.tokens.size();
    }
    firstLineNumber += lines.size();
    if (progress)
      progress->update((*reader)->bytesConsumed(), result.lines, result.tokens);
  }

  if (Status s = tokensOut->finalize(); !s)
    return s;
  if (maskOut) {
    if (Status s = maskOut->finalize(); !s)
      return s;
  } else {
    // A mask left by an earlier run over other data would no longer match.
    std::string stale = lossMaskPrefixFor(options.outputPrefix);
    ::unlink((stale + ".idx").c_str());
    ::unlink((stale + ".bin").c_str());
  }
  if (progress)
    progress->finish((*reader)->bytesConsumed(), result.lines, result.tokens);
  if (options.log && result.skipped > kReportedSkips)
    std::fprintf(options.log, "... %llu malformed lines skipped in all\n",
                 static_cast<unsigned long long>(result.skipped));
  return result;
}

} // namespace octet::data
