// JSON values compared as JSON Schema compares them (enum, const,
// uniqueItems): numbers by value (1 equals 1.0), objects regardless of member
// order, everything else as written. ValueList keeps distinct values with a
// hash index, so a schema listing 100,000 enum values is read, intersected
// and checked in linear time, not pairwise.
//
// Cost: JsonHash and JsonEqual are linear in the value (a number is parsed
// to its exact decimal); ValueList::Add and Contains are one hash and, on a
// match, one comparison. Thread-safety: pure functions; a ValueList is one
// thread's.
#ifndef GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_JSON_VALUES_H_
#define GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_JSON_VALUES_H_

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "grammar/frontends/json_schema/internal/numbers.h"
#include "grammar/frontends/json_schema/internal/schema_doc.h"

namespace grammard::grammar::json_schema_internal {

// A JSON number's exact value; nullopt for anything else.
std::optional<Decimal> NumberOf(const Json& v);

// JSON Schema equality. The nesting it follows is that of the values
// (bounded where they are parsed: schema_doc.h).
bool JsonEqual(const Json& a, const Json& b);
// Equal values hash equally.
uint64_t JsonHash(const Json& v);

// Distinct values (under JsonEqual) in the order first added, by pointer:
// the values must outlive the list.
class ValueList {
 public:
  ValueList() = default;

  // Adds `v` unless an equal value is listed; whether it was added.
  bool Add(const Json* v);
  // The listed value equal to `v`, or null.
  const Json* Find(const Json& v) const;
  bool Contains(const Json& v) const { return Find(v) != nullptr; }

  size_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }
  std::vector<const Json*>::const_iterator begin() const {
    return list_.begin();
  }
  std::vector<const Json*>::const_iterator end() const { return list_.end(); }

 private:
  // Lists this short are searched in place, with no index.
  static constexpr size_t kIndexFrom = 8;

  const Json* FindHashed(const Json& v, uint64_t hash) const;

  std::vector<const Json*> list_;
  // Hash -> position in list_; built once the list reaches kIndexFrom.
  std::unordered_multimap<uint64_t, size_t> index_;
};

}  // namespace grammard::grammar::json_schema_internal

#endif  // GRAMMARD_GRAMMAR_FRONTENDS_JSON_SCHEMA_INTERNAL_JSON_VALUES_H_
