// TokenizerRegistry: the tokenizers a grammard process knows, each with the
// GrammarCompiler built over it, found by name or by fingerprint.
//
// Tokenizers come from a folder at start (one sub-folder per tokenizer) or
// are uploaded by clients (RegisterTokenizer). Registering the same
// vocabulary again under another name adds the name; a name already taken by
// a different vocabulary is AlreadyExists. Uploads are bounded: at most
// Limits::max_names names in all and Limits::max_uploads vocabularies
// uploaded (ResourceExhausted past either), one upload parsed at a time;
// Unregister removes an uploaded name, and the vocabulary with its last
// name (grammars compiled for it keep what they use).
//
// Cost: registering parses tokenizer.json and indexes it (0.1-1 s for a
// large vocabulary); lookups are a map access under a mutex.
// Thread-safety: every method may be called from any thread.
#ifndef GRAMMARD_SERVICE_TOKENIZER_REGISTRY_H_
#define GRAMMARD_SERVICE_TOKENIZER_REGISTRY_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grammar/compiler.h"
#include "grammar/vocabulary.h"

namespace grammard::service {

struct TokenizerEntry {
  std::string name;  // the first name it was registered under
  std::shared_ptr<const grammar::Vocabulary> vocab;
  std::shared_ptr<const grammar::GrammarCompiler> compiler;
};

class TokenizerRegistry {
 public:
  struct Limits {
    int max_names = 32;
    int max_uploads = 8;
  };
  TokenizerRegistry() = default;
  explicit TokenizerRegistry(const Limits& limits) : limits_(limits) {}

  // Loads every sub-folder of `dir` (tokenizer.json and, if present,
  // tokenizer_config.json), named after the sub-folder. Errors name the
  // folder; a missing or empty `dir` is NotFound.
  absl::Status LoadDirectory(const std::string& dir);

  // Builds the vocabulary and registers it under options.name.
  absl::StatusOr<std::shared_ptr<const TokenizerEntry>> Register(
      std::string_view tokenizer_json, std::string_view tokenizer_config_json,
      const grammar::VocabularyOptions& options);

  // Removes an uploaded name. NotFound for an unknown name,
  // FailedPrecondition for one loaded from the folder.
  absl::Status Unregister(std::string_view name);

  // By name or by fingerprint; NotFound naming `name_or_fingerprint` and
  // (some of) the known names otherwise.
  absl::StatusOr<std::shared_ptr<const TokenizerEntry>> Find(
      std::string_view name_or_fingerprint) const;

  // Every name with its tokenizer, sorted by name (a vocabulary registered
  // under two names appears twice).
  std::vector<std::pair<std::string, std::shared_ptr<const TokenizerEntry>>>
  List() const;

 private:
  absl::StatusOr<std::shared_ptr<const TokenizerEntry>> Add(
      std::shared_ptr<const grammar::Vocabulary> vocab, bool uploaded);
  // ResourceExhausted when one more name (and, if `new_vocabulary`, one
  // more uploaded vocabulary) would pass the limits.
  absl::Status CheckRoom(bool new_vocabulary) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  absl::Mutex upload_mu_;  // one upload parsed at a time
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const TokenizerEntry>, std::less<>>
      by_name_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const TokenizerEntry>, std::less<>>
      by_fingerprint_ ABSL_GUARDED_BY(mu_);
  // Names registered by clients (the others came from the folder), and the
  // fingerprints of the vocabularies only they brought.
  std::set<std::string, std::less<>> uploaded_names_ ABSL_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> uploaded_vocabularies_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace grammard::service

#endif  // GRAMMARD_SERVICE_TOKENIZER_REGISTRY_H_
