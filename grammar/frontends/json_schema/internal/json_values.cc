#include "grammar/frontends/json_schema/internal/json_values.h"

#include <functional>
#include <string>

namespace grammard::grammar::json_schema_internal {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

// Murmur's finalizer: unordered_map indexes by the low bits.
uint64_t Finish(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return h;
}

}  // namespace

std::optional<Decimal> NumberOf(const Json& v) {
  if (!v.is_number()) return std::nullopt;
  absl::StatusOr<Decimal> d = ParseDecimal(v.dump());
  if (!d.ok()) return std::nullopt;
  return *d;
}

bool JsonEqual(const Json& a, const Json& b) {
  const bool na = a.is_number(), nb = b.is_number();
  if (na || nb) {
    if (!(na && nb)) return false;
    std::optional<Decimal> x = NumberOf(a), y = NumberOf(b);
    return x && y && Compare(*x, *y) == 0;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!JsonEqual(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !JsonEqual(it.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

uint64_t JsonHash(const Json& v) {
  if (v.is_number()) {
    std::optional<Decimal> d = NumberOf(v);
    if (!d) return 1;
    uint64_t h = Mix(2, d->negative);
    h = Mix(h, std::hash<std::string>()(d->digits));
    return Finish(Mix(h, static_cast<uint64_t>(d->exponent)));
  }
  switch (v.type()) {
    case Json::value_t::null:
      return Finish(3);
    case Json::value_t::boolean:
      return Finish(Mix(4, v.get<bool>()));
    case Json::value_t::string:
      return Finish(
          Mix(5, std::hash<std::string>()(v.get_ref<const std::string&>())));
    case Json::value_t::array: {
      uint64_t h = Mix(6, v.size());
      for (const Json& x : v) h = Mix(h, JsonHash(x));
      return Finish(h);
    }
    case Json::value_t::object: {
      // A sum of the members' hashes: the same in any order.
      uint64_t sum = 0;
      for (auto it = v.begin(); it != v.end(); ++it) {
        sum += Finish(
            Mix(std::hash<std::string>()(it.key()), JsonHash(it.value())));
      }
      return Finish(Mix(7, sum));
    }
    default:
      return Finish(8);
  }
}

const Json* ValueList::Find(const Json& v) const {
  if (index_.empty()) {
    for (const Json* x : list_) {
      if (JsonEqual(*x, v)) return x;
    }
    return nullptr;
  }
  return FindHashed(v, JsonHash(v));
}

const Json* ValueList::FindHashed(const Json& v, uint64_t hash) const {
  auto [lo, hi] = index_.equal_range(hash);
  for (auto it = lo; it != hi; ++it) {
    if (JsonEqual(*list_[it->second], v)) return list_[it->second];
  }
  return nullptr;
}

bool ValueList::Add(const Json* v) {
  if (list_.size() < kIndexFrom) {
    if (Find(*v) != nullptr) return false;
    list_.push_back(v);
    if (list_.size() == kIndexFrom) {
      for (size_t i = 0; i < list_.size(); ++i) {
        index_.emplace(JsonHash(*list_[i]), i);
      }
    }
    return true;
  }
  const uint64_t hash = JsonHash(*v);
  if (FindHashed(*v, hash) != nullptr) return false;
  list_.push_back(v);
  index_.emplace(hash, list_.size() - 1);
  return true;
}

}  // namespace grammard::grammar::json_schema_internal
