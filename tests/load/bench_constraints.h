// The constraints the load benchmarks draw from: the shared bench workloads
// (../shared/bench/WORKLOADS.tsv: JSON, JSON Schema, regex, EBNF) and the
// real-world JSON Schemas of MaskBench (../shared/data/maskbench).
//
// Cost: reads the files (MaskBench: gunzips up to `limit_per_file` lines of
// each). Thread-safety: pure functions.
#ifndef GRAMMARD_TESTS_LOAD_BENCH_CONSTRAINTS_H_
#define GRAMMARD_TESTS_LOAD_BENCH_CONSTRAINTS_H_

#include <string>
#include <vector>

#include "proto/grammard.pb.h"

namespace grammard::load {

struct Workload {
  std::string name;  // WORKLOADS.tsv's, e.g. json_schema
  grammard::v1::Constraint constraint;
};

// The workloads of `shared_data`/../bench, in file order; none when the
// folder is absent. JSON layout as the Constraint's default.
std::vector<Workload> BenchWorkloads(const std::string& shared_data);

// Up to `limit_per_file` (0: all) schemas of each MaskBench file under
// `shared_data`/maskbench, files in name order; none when it is absent.
std::vector<grammard::v1::Constraint> MaskBenchSchemas(
    const std::string& shared_data, int limit_per_file);

}  // namespace grammard::load

#endif  // GRAMMARD_TESTS_LOAD_BENCH_CONSTRAINTS_H_
