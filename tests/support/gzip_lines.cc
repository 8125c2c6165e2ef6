#include "tests/support/gzip_lines.h"

#include <zlib.h>

namespace grammard::testing {

std::optional<std::vector<std::string>> ReadGzipLines(const std::string& path,
                                                      int limit) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  std::vector<std::string> lines;
  std::string line;
  char buf[1 << 16];
  bool ok = true;
  while (limit == 0 || static_cast<int>(lines.size()) < limit) {
    if (gzgets(f, buf, sizeof(buf)) == nullptr) {
      int err = Z_OK;
      gzerror(f, &err);
      ok = err == Z_OK;
      break;
    }
    line += buf;
    if (line.back() != '\n') continue;  // a long line: read on
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
      line.pop_back();
    }
    if (!line.empty()) lines.push_back(std::move(line));
    line.clear();
  }
  if (!line.empty() && (limit == 0 || static_cast<int>(lines.size()) < limit)) {
    lines.push_back(std::move(line));
  }
  gzclose(f);
  if (!ok) return std::nullopt;
  return lines;
}

}  // namespace grammard::testing
