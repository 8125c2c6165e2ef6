#include "grammar/frontends/json_schema/internal/schema_doc.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grammar/base/bounded_json.h"
#include "grammar/base/status_macros.h"

namespace grammard::grammar::json_schema_internal {
namespace {

// Used when the root has no $id, so that relative references still resolve.
constexpr char kDefaultBase[] = "https://grammard.invalid/schema.json";

struct UriParts {
  std::string scheme;
  bool has_authority = false;
  std::string authority;
  std::string path;
  bool has_query = false;
  std::string query;
  bool has_fragment = false;
  std::string fragment;
};

UriParts SplitUri(const std::string& s) {
  UriParts u;
  size_t pos = 0;
  size_t i = 0;
  if (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) {
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) ||
                            s[i] == '+' || s[i] == '-' || s[i] == '.')) {
      ++i;
    }
    if (i < s.size() && s[i] == ':') {
      u.scheme = s.substr(0, i);
      pos = i + 1;
    }
  }
  if (s.compare(pos, 2, "//") == 0) {
    u.has_authority = true;
    size_t end = s.find_first_of("/?#", pos + 2);
    if (end == std::string::npos) end = s.size();
    u.authority = s.substr(pos + 2, end - pos - 2);
    pos = end;
  }
  size_t end = s.find_first_of("?#", pos);
  if (end == std::string::npos) end = s.size();
  u.path = s.substr(pos, end - pos);
  pos = end;
  if (pos < s.size() && s[pos] == '?') {
    u.has_query = true;
    end = s.find('#', pos);
    if (end == std::string::npos) end = s.size();
    u.query = s.substr(pos + 1, end - pos - 1);
    pos = end;
  }
  if (pos < s.size() && s[pos] == '#') {
    u.has_fragment = true;
    u.fragment = s.substr(pos + 1);
  }
  return u;
}

std::string RemoveDotSegments(std::string in) {
  std::string out;
  while (!in.empty()) {
    if (in.compare(0, 3, "../") == 0) {
      in.erase(0, 3);
    } else if (in.compare(0, 2, "./") == 0) {
      in.erase(0, 2);
    } else if (in.compare(0, 3, "/./") == 0) {
      in.erase(0, 2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.compare(0, 4, "/../") == 0 || in == "/..") {
      in = in == "/.." ? "/" : in.substr(3);
      size_t slash = out.rfind('/');
      out.erase(slash == std::string::npos ? 0 : slash);
    } else if (in == "." || in == "..") {
      in.clear();
    } else {
      size_t start = in[0] == '/' ? 1 : 0;
      size_t next = in.find('/', start);
      if (next == std::string::npos) next = in.size();
      out += in.substr(0, next);
      in.erase(0, next);
    }
  }
  return out;
}

std::string JoinUri(const UriParts& u) {
  std::string out;
  if (!u.scheme.empty()) absl::StrAppend(&out, u.scheme, ":");
  if (u.has_authority) absl::StrAppend(&out, "//", u.authority);
  out += u.path;
  if (u.has_query) absl::StrAppend(&out, "?", u.query);
  if (u.has_fragment) absl::StrAppend(&out, "#", u.fragment);
  return out;
}

std::string StripFragment(const std::string& uri) {
  return uri.substr(0, uri.find('#'));
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() &&
        std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(
          static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

Draft DraftOf(const Json& root, Draft fallback) {
  if (!root.is_object()) return fallback;
  auto it = root.find("$schema");
  if (it == root.end() || !it->is_string()) return fallback;
  const std::string& s = it->get_ref<const std::string&>();
  if (s.find("draft-03") != std::string::npos) return Draft::k4;
  if (s.find("draft-04") != std::string::npos) return Draft::k4;
  if (s.find("draft-06") != std::string::npos) return Draft::k6;
  if (s.find("draft-07") != std::string::npos) return Draft::k7;
  if (s.find("2019-09") != std::string::npos) return Draft::k2019;
  if (s.find("2020-12") != std::string::npos) return Draft::k2020;
  return fallback;
}

// Keywords whose value is a map from names to subschemas.
constexpr const char* kSchemaMaps[] = {
    "properties",  "patternProperties", "$defs",
    "definitions", "dependentSchemas",  "dependencies"};
// Keywords whose value is a subschema or an array of them.
constexpr const char* kSchemaValues[] = {"items",
                                         "prefixItems",
                                         "allOf",
                                         "anyOf",
                                         "oneOf",
                                         "additionalProperties",
                                         "additionalItems",
                                         "contains",
                                         "propertyNames",
                                         "not",
                                         "if",
                                         "then",
                                         "else",
                                         "unevaluatedProperties",
                                         "unevaluatedItems",
                                         "contentSchema"};

}  // namespace

absl::StatusOr<Json> ParseJson(std::string_view text) {
  absl::StatusOr<Json> value = ParseBoundedJson(text, kMaxJsonDepth);
  if (!value.ok() && absl::StartsWith(value.status().message(), "not valid")) {
    return absl::InvalidArgumentError(
        absl::StrCat("the schema is ", value.status().message()));
  }
  return value;
}

std::string ResolveUri(const std::string& base_text,
                       const std::string& ref_text) {
  UriParts r = SplitUri(ref_text);
  UriParts b = SplitUri(base_text);
  UriParts t;
  if (!r.scheme.empty()) {
    t = r;
    t.path = RemoveDotSegments(r.path);
  } else {
    if (r.has_authority) {
      t = r;
      t.path = RemoveDotSegments(r.path);
    } else {
      if (r.path.empty()) {
        t.path = b.path;
        t.has_query = r.has_query || b.has_query;
        t.query = r.has_query ? r.query : b.query;
      } else {
        if (r.path[0] == '/') {
          t.path = RemoveDotSegments(r.path);
        } else {
          std::string merged;
          if (b.has_authority && b.path.empty()) {
            merged = "/" + r.path;
          } else {
            size_t slash = b.path.rfind('/');
            merged =
                (slash == std::string::npos ? ""
                                            : b.path.substr(0, slash + 1)) +
                r.path;
          }
          t.path = RemoveDotSegments(merged);
        }
        t.has_query = r.has_query;
        t.query = r.query;
      }
      t.has_authority = b.has_authority;
      t.authority = b.authority;
    }
    t.scheme = b.scheme;
  }
  t.has_fragment = r.has_fragment;
  t.fragment = r.fragment;
  return JoinUri(t);
}

std::string EscapePointerToken(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SchemaDoc>> SchemaDoc::Parse(
    std::string_view text, Draft default_draft,
    const std::map<std::string, std::string>& extra_documents) {
  absl::StatusOr<Json> root = ParseJson(text);
  if (!root.ok()) return root.status();
  return FromJson(*std::move(root), default_draft, extra_documents);
}

absl::StatusOr<std::unique_ptr<SchemaDoc>> SchemaDoc::FromJson(
    Json root, Draft default_draft,
    const std::map<std::string, std::string>& extra_documents) {
  GRAMMARD_RETURN_IF_ERROR(CheckJsonDepth(root, kMaxJsonDepth));
  if (!root.is_object() && !root.is_boolean()) {
    return absl::InvalidArgumentError(
        "a JSON Schema must be an object or a boolean");
  }
  std::unique_ptr<SchemaDoc> doc(new SchemaDoc());
  doc->draft_ = DraftOf(root, default_draft);
  doc->documents_.push_back(std::make_unique<Json>(std::move(root)));
  doc->Intern(&doc->true_, "", kDefaultBase);
  doc->Intern(&doc->false_, "", kDefaultBase);
  const Json& r = *doc->documents_[0];
  doc->resources_[kDefaultBase] = &r;
  doc->Index(r, "", kDefaultBase, 0);
  for (const auto& [uri, body] : extra_documents) {
    absl::StatusOr<Json> extra = ParseJson(body);
    if (!extra.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("document ", uri, ": ", extra.status().message()));
    }
    doc->documents_.push_back(std::make_unique<Json>(*std::move(extra)));
    const Json& e = *doc->documents_.back();
    std::string base = StripFragment(uri);
    doc->resources_.emplace(base, &e);
    doc->Index(e, base + "#", base, 0);
  }
  auto it = doc->info_.find(&r);
  doc->root_ = doc->Intern(
      &r, "", it != doc->info_.end() ? it->second.second : kDefaultBase);
  return doc;
}

std::string SchemaDoc::BaseFor(const Json& node,
                               const std::string& base) const {
  if (!node.is_object()) return base;
  // Before 2019-09, $ref replaces its schema, $id included.
  if (draft_ <= Draft::k7 && node.contains("$ref")) return base;
  auto it = node.find(draft_ == Draft::k4 ? "id" : "$id");
  if (it == node.end() || !it->is_string()) return base;
  const std::string& id = it->get_ref<const std::string&>();
  if (id.empty() || id[0] == '#') return base;
  return StripFragment(ResolveUri(base, id));
}

void SchemaDoc::Index(const Json& node, const std::string& pointer,
                      const std::string& base, int depth) {
  if (!node.is_object() || depth > kMaxJsonDepth) return;
  const std::string here = BaseFor(node, base);
  if (here != base) resources_.emplace(here, &node);
  auto id = node.find(draft_ == Draft::k4 ? "id" : "$id");
  if (id != node.end() && id->is_string() &&
      !(draft_ <= Draft::k7 && node.contains("$ref"))) {
    const std::string& s = id->get_ref<const std::string&>();
    if (s.size() > 1 && s[0] == '#') anchors_.emplace(here + s, &node);
  }
  for (const char* key : {"$anchor", "$dynamicAnchor"}) {
    auto a = node.find(key);
    if (a != node.end() && a->is_string()) {
      anchors_.emplace(here + "#" + a->get<std::string>(), &node);
    }
  }
  if (auto a = node.find("$dynamicAnchor"); a != node.end() && a->is_string()) {
    ++dynamic_anchors_[a->get<std::string>()];
  }
  info_.emplace(&node, std::make_pair(pointer, here));
  for (const char* key : kSchemaMaps) {
    auto m = node.find(key);
    if (m == node.end() || !m->is_object()) continue;
    for (auto it = m->begin(); it != m->end(); ++it) {
      Index(it.value(),
            absl::StrCat(pointer, "/", key, "/", EscapePointerToken(it.key())),
            here, depth + 1);
    }
  }
  for (const char* key : kSchemaValues) {
    auto v = node.find(key);
    if (v == node.end()) continue;
    if (v->is_array()) {
      for (size_t i = 0; i < v->size(); ++i) {
        Index((*v)[i], absl::StrCat(pointer, "/", key, "/", i), here,
              depth + 1);
      }
    } else {
      Index(*v, absl::StrCat(pointer, "/", key), here, depth + 1);
    }
  }
}

int32_t SchemaDoc::Intern(const Json* node, std::string pointer,
                          std::string base) {
  auto [it, inserted] = ids_.emplace(node, num_locations());
  if (inserted) locs_.push_back({node, std::move(pointer), std::move(base)});
  return it->second;
}

int32_t SchemaDoc::ChildOf(int32_t loc, const Json* node, std::string pointer) {
  auto known = ids_.find(node);
  if (known != ids_.end()) return known->second;
  auto it = info_.find(node);
  if (it != info_.end())
    return Intern(node, it->second.first, it->second.second);
  std::string base = BaseFor(*node, locs_[loc].base);
  return Intern(node, std::move(pointer), std::move(base));
}

int32_t SchemaDoc::Child(int32_t loc, std::string_view key) {
  const Json& n = node(loc);
  const Json& c = n.at(std::string(key));
  return ChildOf(loc, &c,
                 absl::StrCat(pointer(loc), "/", EscapePointerToken(key)));
}

int32_t SchemaDoc::Child(int32_t loc, std::string_view key,
                         std::string_view key2) {
  const Json& c = node(loc).at(std::string(key)).at(std::string(key2));
  return ChildOf(loc, &c,
                 absl::StrCat(pointer(loc), "/", EscapePointerToken(key), "/",
                              EscapePointerToken(key2)));
}

int32_t SchemaDoc::Child(int32_t loc, std::string_view key, size_t index) {
  const Json& c = node(loc).at(std::string(key)).at(index);
  return ChildOf(
      loc, &c,
      absl::StrCat(pointer(loc), "/", EscapePointerToken(key), "/", index));
}

int32_t SchemaDoc::ConstSchema(int32_t loc, const Json& value) {
  auto known = const_schemas_.find(&value);
  if (known != const_schemas_.end()) return known->second;
  Json schema = Json::object();
  schema["const"] = value;
  documents_.push_back(std::make_unique<Json>(std::move(schema)));
  const int32_t id =
      Intern(documents_.back().get(), pointer(loc), locs_[loc].base);
  const_schemas_.emplace(&value, id);
  return id;
}

absl::StatusOr<int32_t> SchemaDoc::ResolveRef(int32_t loc,
                                              const std::string& ref) {
  const std::string uri = ResolveUri(locs_[loc].base, ref);
  const size_t hash = uri.find('#');
  const std::string doc_uri = uri.substr(0, hash);
  const std::string fragment =
      hash == std::string::npos ? "" : PercentDecode(uri.substr(hash + 1));
  auto res = resources_.find(doc_uri);
  if (res == resources_.end()) {
    return absl::NotFoundError(
        absl::StrCat("$ref \"", ref, "\" names a document that was not given (",
                     doc_uri, "); remote references are not fetched"));
  }
  const Json* target = res->second;
  if (!fragment.empty() && fragment[0] == '/') {
    size_t pos = 1;
    while (true) {
      size_t end = fragment.find('/', pos);
      if (end == std::string::npos) end = fragment.size();
      std::string token;
      for (size_t i = pos; i < end; ++i) {
        if (fragment[i] == '~' && i + 1 < end && fragment[i + 1] == '1') {
          token.push_back('/');
          ++i;
        } else if (fragment[i] == '~' && i + 1 < end &&
                   fragment[i + 1] == '0') {
          token.push_back('~');
          ++i;
        } else {
          token.push_back(fragment[i]);
        }
      }
      if (target->is_object()) {
        auto it = target->find(token);
        if (it == target->end())
          target = nullptr;
        else
          target = &*it;
      } else if (target->is_array()) {
        bool digits =
            !token.empty() && token.size() < 10 &&
            token.find_first_not_of("0123456789") == std::string::npos;
        size_t index = digits ? std::stoul(token) : target->size();
        target = index < target->size() ? &(*target)[index] : nullptr;
      } else {
        target = nullptr;
      }
      if (target == nullptr) {
        return absl::NotFoundError(
            absl::StrCat("$ref \"", ref, "\" points at nothing"));
      }
      if (end == fragment.size()) break;
      pos = end + 1;
    }
  } else if (!fragment.empty()) {
    auto a = anchors_.find(doc_uri + "#" + fragment);
    if (a == anchors_.end()) {
      return absl::NotFoundError(
          absl::StrCat("$ref \"", ref, "\" names an unknown anchor"));
    }
    target = a->second;
  }
  auto known = ids_.find(target);
  if (known != ids_.end()) return known->second;
  auto it = info_.find(target);
  if (it != info_.end()) {
    return Intern(target, it->second.first, it->second.second);
  }
  auto root_info = info_.find(res->second);
  std::string base =
      root_info != info_.end() ? root_info->second.second : doc_uri;
  std::string root_pointer =
      root_info != info_.end() ? root_info->second.first : "";
  return Intern(target, root_pointer + fragment, base);
}

}  // namespace grammard::grammar::json_schema_internal
