// ReadGzipLines: the lines of a gzip-compressed text file (MaskBench's
// *.jsonl.gz), through zlib.
//
// Cost: one pass over the file; holds the lines read. Thread-safe.
#ifndef GRAMMARD_TESTS_SUPPORT_GZIP_LINES_H_
#define GRAMMARD_TESTS_SUPPORT_GZIP_LINES_H_

#include <optional>
#include <string>
#include <vector>

namespace grammard::testing {

// Up to `limit` (0: all) non-empty lines, without their line ends; nullopt
// if the file cannot be read or is damaged.
std::optional<std::vector<std::string>> ReadGzipLines(const std::string& path,
                                                      int limit);

}  // namespace grammard::testing

#endif  // GRAMMARD_TESTS_SUPPORT_GZIP_LINES_H_
