// Rank sync: before scheduling, the ranks of a tensor/data-parallel group
// agree on which sequences may step, with SGLang's semantics: every rank
// reports which of its sequences have a ready grammar and which failed;
// all get the same answer, ready = intersection over ranks minus failed,
// failed = union over ranks. A rank that does not report in time fails the
// round for every rank (DEADLINE_EXCEEDED naming it).
//
// RankExchange is the collective. GrammardRankExchange runs it through
// grammard's SyncGroup RPC; an engine that already has a collective (e.g.
// torch.distributed.all_gather of the reports) implements Exchange with it
// and MergeRankReports, which is exactly what the server computes.
// SyncReadiness ties a Client's readiness to an exchange.
//
// Cost: one RPC (or the engine's collective) per round; the merge is
// O(ids log ids). Thread-safety: MergeRankReports is pure;
// GrammardRankExchange may be called from any thread (rounds of one group
// are the caller's to number).
#ifndef GRAMMARD_CLIENT_RANK_EXCHANGE_H_
#define GRAMMARD_CLIENT_RANK_EXCHANGE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "proto/grammard.grpc.pb.h"

namespace grammard::client {

// One rank's report (Client::GetReadiness gives it) and the agreed outcome
// (both lists sorted, without repeats).
using RankReport = Readiness;
using RankAgreement = Readiness;

// failed = union of the reports' failed; ready = ids every report calls
// ready, minus failed.
RankAgreement MergeRankReports(absl::Span<const RankReport> reports);

class RankExchange {
 public:
  virtual ~RankExchange() = default;
  // Contributes this rank's report to round `round` and returns the
  // agreement of all ranks, or an error that every rank of the round sees
  // (DEADLINE_EXCEEDED naming the ranks missing after `timeout`).
  virtual absl::StatusOr<RankAgreement> Exchange(
      uint64_t round, const RankReport& mine,
      std::chrono::milliseconds timeout) = 0;
};

// Through grammard's SyncGroup: the server holds the barrier, so ranks need
// no channel to each other, only to the same daemon.
class GrammardRankExchange : public RankExchange {
 public:
  GrammardRankExchange(std::shared_ptr<grpc::Channel> channel,
                       std::string group, int32_t rank, int32_t world_size);

  absl::StatusOr<RankAgreement> Exchange(
      uint64_t round, const RankReport& mine,
      std::chrono::milliseconds timeout) override;

 private:
  const std::unique_ptr<grammard::v1::Grammard::Stub> stub_;
  const std::string group_;
  const int32_t rank_;
  const int32_t world_size_;
};

// The agreed readiness of `ids` for one round: this rank's view from
// client.GetReadiness(ids), exchanged through `exchange`.
absl::StatusOr<RankAgreement> SyncReadiness(const Client& client,
                                            RankExchange& exchange,
                                            uint64_t round,
                                            absl::Span<const uint64_t> ids,
                                            std::chrono::milliseconds timeout);

}  // namespace grammard::client

#endif  // GRAMMARD_CLIENT_RANK_EXCHANGE_H_
