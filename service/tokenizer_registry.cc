#include "service/tokenizer_registry.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grammar/base/status_macros.h"

namespace grammard::service {
namespace {

std::vector<std::string> SubFolders(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      // stat, not d_type: folders may be symlinks (Kubernetes mounts are).
      struct stat st;
      if (name != "." && name != ".." &&
          stat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        names.push_back(name);
      }
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

absl::Status TokenizerRegistry::LoadDirectory(const std::string& dir) {
  std::vector<std::string> names = SubFolders(dir);
  if (names.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no tokenizer folders under ", dir));
  }
  for (const std::string& name : names) {
    grammar::VocabularyOptions options;
    options.name = name;
    auto vocab = grammar::Vocabulary::FromDirectory(dir + "/" + name, options);
    if (!vocab.ok()) {
      return absl::Status(vocab.status().code(),
                          absl::StrCat("tokenizer folder ", dir, "/", name,
                                       ": ", vocab.status().message()));
    }
    auto added = Add(*std::move(vocab), /*uploaded=*/false);
    if (!added.ok()) return added.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const TokenizerEntry>>
TokenizerRegistry::Register(std::string_view tokenizer_json,
                            std::string_view tokenizer_config_json,
                            const grammar::VocabularyOptions& options) {
  if (options.name.empty()) {
    return absl::InvalidArgumentError("tokenizer: a name is required");
  }
  {
    absl::MutexLock lock(&mu_);
    if (by_name_.count(options.name) == 0) {
      GRAMMARD_RETURN_IF_ERROR(CheckRoom(false));
    }
  }
  // Parsing a tokenizer.json takes memory several times its size: one at a
  // time.
  absl::MutexLock upload(&upload_mu_);
  auto vocab = grammar::Vocabulary::FromJson(tokenizer_json,
                                             tokenizer_config_json, options);
  if (!vocab.ok()) {
    return absl::Status(vocab.status().code(),
                        absl::StrCat("tokenizer ", options.name, ": ",
                                     vocab.status().message()));
  }
  return Add(*std::move(vocab), /*uploaded=*/true);
}

absl::Status TokenizerRegistry::CheckRoom(bool new_vocabulary) const {
  if (static_cast<int>(uploaded_names_.size()) >= limits_.max_names) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tokenizer: ", uploaded_names_.size(),
        " names registered already (--max_tokenizer_names); unregister one "
        "first"));
  }
  if (new_vocabulary &&
      static_cast<int>(uploaded_vocabularies_.size()) >= limits_.max_uploads) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tokenizer: ", uploaded_vocabularies_.size(),
        " vocabularies uploaded already (--max_uploaded_tokenizers); "
        "unregister one first"));
  }
  return absl::OkStatus();
}

absl::Status TokenizerRegistry::Unregister(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown tokenizer \"", std::string(name), "\""));
  }
  auto uploaded = uploaded_names_.find(name);
  if (uploaded == uploaded_names_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tokenizer \"", std::string(name),
        "\" was loaded from --tokenizer_dir; only uploads can be removed"));
  }
  const std::string fingerprint = it->second->vocab->fingerprint();
  by_name_.erase(it);
  uploaded_names_.erase(uploaded);
  for (const auto& [other, entry] : by_name_) {
    if (entry->vocab->fingerprint() == fingerprint) return absl::OkStatus();
  }
  by_fingerprint_.erase(fingerprint);
  uploaded_vocabularies_.erase(fingerprint);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const TokenizerEntry>> TokenizerRegistry::Add(
    std::shared_ptr<const grammar::Vocabulary> vocab, bool uploaded) {
  const std::string name = vocab->name();
  {
    absl::MutexLock lock(&mu_);
    auto named = by_name_.find(name);
    if (named != by_name_.end()) {
      if (named->second->vocab->fingerprint() == vocab->fingerprint()) {
        return named->second;
      }
      return absl::AlreadyExistsError(absl::StrCat(
          "tokenizer name ", name, " is taken by another vocabulary"));
    }
    auto same = by_fingerprint_.find(vocab->fingerprint());
    if (same != by_fingerprint_.end()) {
      if (uploaded) {
        GRAMMARD_RETURN_IF_ERROR(CheckRoom(false));
        uploaded_names_.insert(name);
      }
      by_name_[name] = same->second;
      return same->second;
    }
    if (uploaded) {
      GRAMMARD_RETURN_IF_ERROR(CheckRoom(true));
    }
  }
  // Indexing takes a while; do it outside the lock.
  auto entry = std::make_shared<TokenizerEntry>();
  entry->name = name;
  entry->compiler = std::make_shared<const grammar::GrammarCompiler>(vocab);
  entry->vocab = std::move(vocab);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = by_name_.emplace(name, entry);
  if (!inserted) {
    if (it->second->vocab->fingerprint() != entry->vocab->fingerprint()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "tokenizer name ", name, " is taken by another vocabulary"));
    }
    return it->second;
  }
  by_fingerprint_.emplace(entry->vocab->fingerprint(), entry);
  if (uploaded) {
    uploaded_names_.insert(name);
    uploaded_vocabularies_.insert(entry->vocab->fingerprint());
  }
  return std::shared_ptr<const TokenizerEntry>(entry);
}

absl::StatusOr<std::shared_ptr<const TokenizerEntry>> TokenizerRegistry::Find(
    std::string_view name_or_fingerprint) const {
  absl::MutexLock lock(&mu_);
  auto it = by_name_.find(name_or_fingerprint);
  if (it != by_name_.end()) return it->second;
  it = by_fingerprint_.find(name_or_fingerprint);
  if (it != by_fingerprint_.end()) return it->second;
  // A few names, whatever was registered.
  constexpr size_t kShownNames = 16;
  std::vector<std::string> names;
  for (const auto& [name, entry] : by_name_) {
    if (names.size() == kShownNames) break;
    names.push_back(name);
  }
  std::string known = names.empty() ? "none" : absl::StrJoin(names, ", ");
  if (by_name_.size() > names.size()) {
    absl::StrAppend(&known, " and ", by_name_.size() - names.size(), " more");
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown tokenizer \"", std::string(name_or_fingerprint.substr(0, 128)),
      "\" (known: ", known, ")"));
}

std::vector<std::pair<std::string, std::shared_ptr<const TokenizerEntry>>>
TokenizerRegistry::List() const {
  absl::MutexLock lock(&mu_);
  return {by_name_.begin(), by_name_.end()};
}

}  // namespace grammard::service
