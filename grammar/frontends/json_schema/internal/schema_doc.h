// SchemaDoc: a parsed JSON Schema document whose subschemas are named by
// small integer ids ("locations"), with $ref resolution.
//
//   absl::StatusOr<std::unique_ptr<SchemaDoc>> doc = SchemaDoc::Parse(text,
//       Draft::k2020);
//   int32_t props = (*doc)->Child((*doc)->root(), "properties", "name");
//   absl::StatusOr<int32_t> target = (*doc)->ResolveRef(props, "#/$defs/a");
//
// A location is a JSON value inside the document (or inside one of the extra
// documents given to Parse); two paths to the same value give the same id.
// Each carries the JSON pointer it was first reached by (for messages) and
// its base URI (for $ref). $id (id in draft 4) changes the base URI, $anchor
// and draft-6/7 fragment-only $id name anchors. A $ref resolves against the
// base URI to a document, then to its root, a JSON pointer or an anchor.
// References to documents that were not given are NotFound errors: nothing
// is ever fetched.
//
// Cost: parsing is linear in the document; indexing walks every subschema
// once. Thread-safety: Child and ResolveRef intern new locations, so a doc
// belongs to one thread.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_SCHEMA_DOC_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_SCHEMA_DOC_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/base/bounded_json.h"
#include "nlohmann/json.hpp"

namespace grammard::grammar::json_schema_internal {

using Json = nlohmann::ordered_json;

enum class Draft { k4, k6, k7, k2019, k2020 };

// Deepest nesting of arrays and objects a document may have.
inline constexpr int kMaxJsonDepth = kMaxSchemaJsonDepth;

// Parses JSON text without exceptions, refusing nesting past kMaxJsonDepth.
absl::StatusOr<Json> ParseJson(std::string_view text);

// RFC 3986 reference resolution (section 5.2).
std::string ResolveUri(const std::string& base, const std::string& ref);

class SchemaDoc {
 public:
  // The locations of the schemas `true` and `false`.
  static constexpr int32_t kTrue = 0;
  static constexpr int32_t kFalse = 1;

  // `extra_documents` maps absolute URIs to schema texts that $ref may
  // reach. The draft comes from the root's $schema, else `default_draft`.
  static absl::StatusOr<std::unique_ptr<SchemaDoc>> Parse(
      std::string_view text, Draft default_draft,
      const std::map<std::string, std::string>& extra_documents = {});
  // The same for a root already parsed (nested at most kMaxJsonDepth deep,
  // else InvalidArgument).
  static absl::StatusOr<std::unique_ptr<SchemaDoc>> FromJson(
      Json root, Draft default_draft,
      const std::map<std::string, std::string>& extra_documents = {});

  SchemaDoc(const SchemaDoc&) = delete;
  SchemaDoc& operator=(const SchemaDoc&) = delete;

  int32_t root() const { return root_; }
  Draft draft() const { return draft_; }
  const Json& node(int32_t loc) const { return *locs_[loc].node; }
  const std::string& pointer(int32_t loc) const { return locs_[loc].pointer; }
  int32_t num_locations() const { return static_cast<int32_t>(locs_.size()); }

  // The location of node(loc)[key] (and [key2], or [index]); the value must
  // exist.
  int32_t Child(int32_t loc, std::string_view key);
  int32_t Child(int32_t loc, std::string_view key, std::string_view key2);
  int32_t Child(int32_t loc, std::string_view key, size_t index);

  // The location of the schema {"const": value}, made once per value (a
  // node of this document, found at `loc`): how a negation names "any value
  // but this one" for a member or an item.
  int32_t ConstSchema(int32_t loc, const Json& value);

  // The location `ref` names, resolved against loc's base URI.
  absl::StatusOr<int32_t> ResolveRef(int32_t loc, const std::string& ref);

  // How many subschemas, across all documents, declare $dynamicAnchor
  // `name`.
  int DynamicAnchorCount(const std::string& name) const {
    auto it = dynamic_anchors_.find(name);
    return it == dynamic_anchors_.end() ? 0 : it->second;
  }

 private:
  struct Location {
    const Json* node;
    std::string pointer;
    std::string base;
  };
  SchemaDoc() = default;

  int32_t Intern(const Json* node, std::string pointer, std::string base);
  // A child of `loc` holding `node`, reached by `pointer`.
  int32_t ChildOf(int32_t loc, const Json* node, std::string pointer);
  // The base URI in effect inside `node` when its parent's is `base`.
  std::string BaseFor(const Json& node, const std::string& base) const;
  // Records resources and anchors of the subschema `node` and below.
  void Index(const Json& node, const std::string& pointer,
             const std::string& base, int depth);

  std::vector<std::unique_ptr<Json>> documents_;
  std::vector<Location> locs_;
  std::unordered_map<const Json*, int32_t> ids_;
  // Absolute URI without fragment -> resource root; "uri#name" -> anchor.
  std::map<std::string, const Json*> resources_;
  std::map<std::string, const Json*> anchors_;
  std::map<std::string, int> dynamic_anchors_;
  std::unordered_map<const Json*, int32_t> const_schemas_;
  // Every indexed subschema: its pointer and base URI.
  std::unordered_map<const Json*, std::pair<std::string, std::string>> info_;
  Draft draft_ = Draft::k2020;
  int32_t root_ = -1;
  Json true_ = true;
  Json false_ = false;
};

// The JSON pointer token for `key` (~ and / escaped).
std::string EscapePointerToken(std::string_view key);

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_SCHEMA_DOC_H_
