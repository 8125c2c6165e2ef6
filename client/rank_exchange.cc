#include "client/rank_exchange.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grammard::client {

namespace v1 = grammard::v1;

namespace {

// Sorted, without repeats.
std::vector<uint64_t> Canonical(std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// How much longer than the barrier's own timeout the RPC may take, so the
// server's answer naming the missing ranks arrives before the client gives
// up on the call with a bare DEADLINE_EXCEEDED.
constexpr std::chrono::seconds kRpcGrace(5);

}  // namespace

RankAgreement MergeRankReports(absl::Span<const RankReport> reports) {
  RankAgreement agreed;
  std::map<uint64_t, size_t> ready_count;
  for (const RankReport& r : reports) {
    // A rank listing an id twice still counts once towards the intersection.
    for (uint64_t id : Canonical(r.ready)) ++ready_count[id];
    agreed.failed.insert(agreed.failed.end(), r.failed.begin(), r.failed.end());
  }
  agreed.failed = Canonical(std::move(agreed.failed));
  for (const auto& [id, count] : ready_count) {
    if (count == reports.size() &&
        !std::binary_search(agreed.failed.begin(), agreed.failed.end(), id)) {
      agreed.ready.push_back(id);
    }
  }
  return agreed;
}

GrammardRankExchange::GrammardRankExchange(
    std::shared_ptr<grpc::Channel> channel, std::string group, int32_t rank,
    int32_t world_size)
    : stub_(v1::Grammard::NewStub(channel)),
      group_(std::move(group)),
      rank_(rank),
      world_size_(world_size) {}

absl::StatusOr<RankAgreement> GrammardRankExchange::Exchange(
    uint64_t round, const RankReport& mine, std::chrono::milliseconds timeout) {
  v1::SyncGroupRequest request;
  request.set_group_id(group_);
  request.set_round(round);
  request.set_rank(rank_);
  request.set_world_size(world_size_);
  request.mutable_ready()->Add(mine.ready.begin(), mine.ready.end());
  request.mutable_failed()->Add(mine.failed.begin(), mine.failed.end());
  request.set_timeout_ms(static_cast<uint32_t>(
      std::max<int64_t>(1, std::min<int64_t>(timeout.count(), UINT32_MAX))));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout + kRpcGrace);
  v1::SyncGroupResponse response;
  const grpc::Status status = stub_->SyncGroup(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(
        static_cast<absl::StatusCode>(status.error_code()),
        absl::StrCat("rank sync of group ", group_, " round ", round, " (rank ",
                     rank_, " of ", world_size_,
                     "): ", status.error_message()));
  }
  RankAgreement agreed;
  agreed.ready.assign(response.ready().begin(), response.ready().end());
  agreed.failed.assign(response.failed().begin(), response.failed().end());
  return agreed;
}

absl::StatusOr<RankAgreement> SyncReadiness(const Client& client,
                                            RankExchange& exchange,
                                            uint64_t round,
                                            absl::Span<const uint64_t> ids,
                                            std::chrono::milliseconds timeout) {
  return exchange.Exchange(round, client.GetReadiness(ids), timeout);
}

}  // namespace grammard::client
