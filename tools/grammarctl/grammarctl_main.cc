// grammarctl: a command-line client of grammard, for trying grammars by hand
// and for smoke tests. `generate` decodes through client::Client, so it sees
// what an inference node sees, and prints token text with the engine's
// grammar::Vocabulary (grammard has no detokenize RPC); `compile` calls the
// Compile RPC itself, to print the reply's fields the client library does
// not return.
//
//   grammarctl compile  --target=HOST:PORT --tokenizer=llama3 <constraint>
//   grammarctl generate --target=HOST:PORT --tokenizer=llama3 <constraint>
//                       [--seed=1 --max_tokens=256 --sequences=1]
//
// <constraint> is one of --json_schema, --regex, --ebnf, --choices,
// --json_object, --structural_tag (see README.md). Exit status 0 on success,
// 1 on an RPC, compile or step error (the message goes to stderr), 2 on bad
// usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grammar/vocabulary.h"
#include "grpcpp/grpcpp.h"
#include "proto/grammard.grpc.pb.h"
#include "tools/grammarctl/constraint_spec.h"
#include "tools/grammarctl/generator.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "grammard's gRPC address.");
ABSL_FLAG(std::string, tokenizer, "llama3",
          "Tokenizer name (or fingerprint) on the server.");
ABSL_FLAG(std::string, tokenizer_dir, ".deps/tokenizers",
          "generate: folder holding <name>/tokenizer.json, read to print the "
          "generated text (the server returns only token ids).");
ABSL_FLAG(int, timeout_s, 60, "Deadline of the whole command's RPCs.");

ABSL_FLAG(std::string, json_schema, "", "A JSON Schema, as text or a file.");
ABSL_FLAG(std::string, regex, "", "A regex the whole output must match.");
ABSL_FLAG(std::string, ebnf, "", "A file holding a GBNF / EBNF grammar.");
ABSL_FLAG(std::string, choices, "", "Comma-separated allowed outputs.");
ABSL_FLAG(bool, json_object, false, "Any JSON object.");
ABSL_FLAG(std::string, structural_tag, "",
          "An XGrammar structural tag, as JSON text or a file.");
ABSL_FLAG(std::string, whitespace, "any",
          "JSON layout: any, compact or indented.");
ABSL_FLAG(bool, lenient, false,
          "Drop schema keywords that cannot be enforced exactly.");

ABSL_FLAG(uint32_t, seed, 1, "generate: random seed (sequence i: seed + i).");
ABSL_FLAG(int, max_tokens, 256, "generate: tokens per sequence at most.");
ABSL_FLAG(int, sequences, 1, "generate: sequences decoded together.");
ABSL_FLAG(double, eos_probability, 0.5,
          "generate: chance of taking EOS whenever the text may end.");

namespace {

namespace v1 = grammard::v1;
using grammard::grammarctl::BuildConstraint;
using grammard::grammarctl::ConstraintSpec;

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() +
         std::chrono::seconds(absl::GetFlag(FLAGS_timeout_s));
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "grammarctl: %s\n", message.c_str());
  return 1;
}

int FailStatus(const absl::Status& status) { return Fail(status.ToString()); }

int FailGrpc(const char* rpc, const grpc::Status& status) {
  return Fail(absl::StrCat(
      rpc, ": ",
      absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                   status.error_message())
          .ToString()));
}

absl::StatusOr<v1::Constraint> ConstraintFromFlags() {
  ConstraintSpec spec;
  spec.json_schema = absl::GetFlag(FLAGS_json_schema);
  spec.regex = absl::GetFlag(FLAGS_regex);
  spec.ebnf = absl::GetFlag(FLAGS_ebnf);
  spec.choices = absl::GetFlag(FLAGS_choices);
  spec.json_object = absl::GetFlag(FLAGS_json_object);
  spec.structural_tag = absl::GetFlag(FLAGS_structural_tag);
  spec.whitespace = absl::GetFlag(FLAGS_whitespace);
  spec.lenient = absl::GetFlag(FLAGS_lenient);
  return BuildConstraint(spec);
}

// client::Client::Compile returns the state and grammar id only; the compile
// time, cache hit, size and dropped keywords printed here are the reply's.
int RunCompile(const v1::Constraint& constraint) {
  auto stub = v1::Grammard::NewStub(grpc::CreateChannel(
      absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials()));
  v1::CompileRequest request;
  request.set_tokenizer(absl::GetFlag(FLAGS_tokenizer));
  *request.mutable_constraint() = constraint;
  request.set_wait(true);
  v1::CompileResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  const grpc::Status status = stub->Compile(&context, request, &response);
  if (!status.ok()) return FailGrpc("Compile", status);
  for (const v1::DroppedKeyword& d : response.dropped()) {
    std::printf("dropped keyword=%s pointer=%s reason=%s\n",
                d.keyword().c_str(), d.pointer().c_str(), d.reason().c_str());
  }
  std::printf(
      "state=%s grammar_id=%s compile_ms=%.3f cache_hit=%s num_states=%d "
      "memory_bytes=%lld\n",
      v1::GrammarState_Name(response.state()).c_str(),
      response.grammar_id().c_str(), response.compile_seconds() * 1e3,
      response.cache_hit() ? "true" : "false", response.num_states(),
      static_cast<long long>(response.memory_bytes()));
  switch (response.state()) {
    case v1::GRAMMAR_STATE_READY:
      return 0;
    case v1::GRAMMAR_STATE_FAILED:
      return Fail(absl::StrCat(
          "compile failed: ",
          absl::Status(static_cast<absl::StatusCode>(response.error().code()),
                       response.error().message())
              .ToString()));
    default:
      return Fail("still compiling at the deadline (raise --timeout_s)");
  }
}

int RunGenerate(const v1::Constraint& constraint) {
  const std::chrono::seconds timeout(absl::GetFlag(FLAGS_timeout_s));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  grammard::client::ClientOptions client_options;
  client_options.target = absl::GetFlag(FLAGS_target);
  client_options.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  client_options.connect_timeout = std::min<std::chrono::milliseconds>(
      client_options.connect_timeout, timeout);
  client_options.step_timeout = timeout;
  client_options.outage_timeout = timeout;
  auto client = grammard::client::Client::Connect(client_options);
  if (!client.ok()) return FailStatus(client.status());
  // The tokenizer's name on the server (--tokenizer may be its fingerprint)
  // names its folder under --tokenizer_dir.
  auto tokenizers = (*client)->ListTokenizers(timeout);
  if (!tokenizers.ok()) return FailStatus(tokenizers.status());
  const std::string wanted = absl::GetFlag(FLAGS_tokenizer);
  std::string name;
  for (const grammard::client::TokenizerInfo& t : *tokenizers) {
    if (t.fingerprint == (*client)->tokenizer_fingerprint() &&
        (name.empty() || t.name == wanted)) {
      name = t.name;
    }
  }
  grammard::grammar::VocabularyOptions vocab_options;
  vocab_options.name = name;
  const std::string dir =
      grammard::grammarctl::UserPath(absl::GetFlag(FLAGS_tokenizer_dir)) + "/" +
      name;
  auto vocab = grammard::grammar::Vocabulary::FromDirectory(dir, vocab_options);
  if (!vocab.ok()) return FailStatus(vocab.status());
  // The daemon loads its tokenizer folders the same way, so the same files
  // give the same fingerprint; other files would print other text.
  if ((*vocab)->fingerprint() != (*client)->tokenizer_fingerprint()) {
    std::fprintf(stderr,
                 "grammarctl: warning: %s is not the tokenizer the server "
                 "serves as %s (another fingerprint); the text may be wrong\n",
                 dir.c_str(), name.c_str());
  }

  grammard::grammarctl::GenerateOptions options;
  options.constraint = constraint;
  options.sequences = absl::GetFlag(FLAGS_sequences);
  options.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.eos_probability = absl::GetFlag(FLAGS_eos_probability);
  options.deadline = deadline;
  auto generations = grammard::grammarctl::Generate(client->get(), options);
  if (!generations.ok()) return FailStatus(generations.status());
  for (const auto& g : *generations) {
    std::string out;
    for (int32_t id : g.tokens) {
      // An id past a smaller local tokenizer (warned about) prints nothing.
      if (id < (*vocab)->size()) out += (*vocab)->bytes(id);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::printf("\nsequence=%llu tokens=%zu terminated=%s elapsed_ms=%.3f\n",
                static_cast<unsigned long long>(g.sequence_id), g.tokens.size(),
                g.terminated ? "true" : "false", g.elapsed_ms);
  }
  return 0;
}

}  // namespace

// What --help prints above the flags (those of this file: absl's --help
// shows the flags of <program>_main.cc).
constexpr char kUsage[] =
    R"(a command-line client of grammard, for trying grammars by hand.

  grammarctl compile  --target=HOST:PORT --tokenizer=NAME <constraint>
  grammarctl generate --target=HOST:PORT --tokenizer=NAME <constraint>
                      [--seed=1 --max_tokens=256 --sequences=1]

<constraint> is one of --json_schema, --regex, --ebnf, --choices,
--json_object, --structural_tag (JSON layout: --whitespace, --lenient).
Exit status: 0 on success, 1 on an RPC, compile or step error, 2 on bad
usage.)";

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string command = args.size() == 2 ? args[1] : "";
  if (command != "compile" && command != "generate") {
    std::fprintf(stderr, "grammarctl: %s\n",
                 std::string(absl::ProgramUsageMessage()).c_str());
    return 2;
  }
  absl::StatusOr<v1::Constraint> constraint = ConstraintFromFlags();
  if (!constraint.ok()) {
    std::fprintf(stderr, "grammarctl: %s\n",
                 std::string(constraint.status().message()).c_str());
    return 2;
  }
  if (command == "compile") return RunCompile(*constraint);
  if (absl::GetFlag(FLAGS_sequences) < 1 ||
      absl::GetFlag(FLAGS_max_tokens) < 1) {
    std::fprintf(stderr, "grammarctl: --sequences and --max_tokens >= 1\n");
    return 2;
  }
  return RunGenerate(*constraint);
}
