// One rank of client_rank_sync_test's multi-process group, through the C
// ABI as a Python engine would use it: connects, opens sequences 1-4 (the
// one named by --fail_id with a schema that cannot compile), waits for
// their grammars, and joins one SyncGroup round. Prints
// "ready=<ids> failed=<ids>" or "error=<code> <message>" and exits 0 unless
// the setup itself failed.
//
//   client_rank_child --target=HOST:PORT --group=G --rank=R --world=N
//                     [--fail_id=ID] [--timeout_ms=MS]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "client/grammard_client.h"

namespace {

constexpr char kSchema[] =
    R"({"type": "object", "properties": {"x": {"type": "integer"}}})";
constexpr char kBrokenSchema[] = R"({"type": "no-such-type"})";

const char* Flag(int argc, char** argv, const char* name, const char* dflt) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') {
      return argv[i] + n + 1;
    }
  }
  return dflt;
}

int Fail(grammard_client* client, const char* what) {
  std::printf("setup failed: %s: %s\n", what,
              grammard_client_last_error(client));
  grammard_client_destroy(client);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string target = Flag(argc, argv, "--target", "");
  const std::string group = Flag(argc, argv, "--group", "");
  const int rank = std::atoi(Flag(argc, argv, "--rank", "0"));
  const int world = std::atoi(Flag(argc, argv, "--world", "1"));
  const uint64_t fail_id =
      std::strtoull(Flag(argc, argv, "--fail_id", "0"), nullptr, 10);
  const int64_t timeout_ms =
      std::strtoll(Flag(argc, argv, "--timeout_ms", "30000"), nullptr, 10);

  grammard_client_options options;
  std::memset(&options, 0, sizeof(options));
  options.target = target.c_str();
  options.tokenizer = "llama3";
  options.connect_timeout_ms = 60000;
  options.step_timeout_ms = 120000;
  grammard_client* client = nullptr;
  if (grammard_client_connect(&options, &client) != 0) {
    return Fail(client, "connect");
  }
  const uint64_t ids[] = {1, 2, 3, 4};
  for (uint64_t id : ids) {
    const char* schema = id == fail_id ? kBrokenSchema : kSchema;
    if (grammard_client_open(client, id, GRAMMARD_CONSTRAINT_JSON_SCHEMA,
                             schema, std::strlen(schema), 1, -1) != 0) {
      return Fail(client, "open");
    }
  }
  if (grammard_client_wait_ready(client, ids, 4, 0) != 0) {
    return Fail(client, "wait_ready");
  }
  int32_t agreed[4];
  const int32_t code =
      grammard_client_sync_readiness(client, group.c_str(), /*round=*/1, rank,
                                     world, ids, 4, timeout_ms, agreed);
  if (code != 0) {
    std::printf("error=%d %s\n", code, grammard_client_last_error(client));
  } else {
    std::string ready, failed;
    auto append = [](std::string* list, uint64_t id) {
      if (!list->empty()) *list += ",";
      *list += std::to_string(id);
    };
    for (int i = 0; i < 4; ++i) {
      if (agreed[i] == GRAMMARD_STATE_READY) append(&ready, ids[i]);
      if (agreed[i] == GRAMMARD_STATE_FAILED) append(&failed, ids[i]);
    }
    std::printf("ready=%s failed=%s\n", ready.c_str(), failed.c_str());
  }
  grammard_client_destroy(client);
  return 0;
}
