#include "tests/unit/data/TestUtil.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace octet::testutil {

std::string makeTempDir(const std::string &tag) {
  std::string base = OCTET_TEST_WORK_DIR;
  ::mkdir(base.c_str(), 0755);
  std::string pattern = base + "/" + tag + "-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (!mkdtemp(name.data()))
    throw std::runtime_error("mkdtemp failed for " + pattern);
  return name.data();
}

void writeFile(const std::string &path, const std::string &contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool fileExists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

std::vector<std::string> listDirectory(const std::string &path) {
  std::vector<std::string> names;
  if (DIR *dir = ::opendir(path.c_str())) {
    while (dirent *entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        names.push_back(name);
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string tokenizerGoldenDir(std::string &why) {
  static std::string cachedDir, cachedWhy;
  static bool done = false;
  if (done) {
    why = cachedWhy;
    return cachedDir;
  }
  done = true;
  std::string python = OCTET_PYTHON3;
  if (python.empty())
    python = "python3";
  std::string check = python + " -c 'import tokenizers' >/dev/null 2>&1";
  if (std::system(check.c_str()) != 0) {
    cachedWhy = "python3 cannot import the `tokenizers` package (pip install "
                "-r scripts/requirements-test.txt); the HF comparison is "
                "skipped";
    why = cachedWhy;
    return "";
  }
  std::string script = std::string(OCTET_SOURCE_DIR) +
                       "/tests/unit/data/make_tokenizer_golden.py";
  std::string dir = std::string(OCTET_TEST_WORK_DIR) + "/tokenizer-golden";
  ::mkdir(OCTET_TEST_WORK_DIR, 0755);
  ::mkdir(dir.c_str(), 0755);
  // Tests run as parallel processes under ctest: one generates, the others
  // wait for it and reuse its output while the script is unchanged.
  int lock = ::open((dir + "/.lock").c_str(), O_CREAT | O_RDWR, 0644);
  ::flock(lock, LOCK_EX);
  std::string stamp =
      std::to_string(std::hash<std::string>()(readFile(script)));
  if (readFile(dir + "/stamp") != stamp) {
    std::string command = python + " " + script + " --out " + dir;
    if (std::system(command.c_str()) != 0) {
      cachedWhy = "FAILED: " + command;
      why = cachedWhy;
      ::close(lock);
      return "";
    }
    writeFile(dir + "/stamp", stamp);
  }
  ::close(lock);
  cachedDir = dir;
  return dir;
}

} // namespace octet::testutil
