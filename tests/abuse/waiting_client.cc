// A client that leaves SyncGroup calls waiting and then vanishes: makes
// CALLS calls, each of its own round of a world of 2 that no other rank
// joins, with timeout_ms 4294967295 and no deadline, prints "waiting" once
// the daemon has them all, and blocks until it is killed.
// registry_sync_abuse_test kills it (SIGKILL) and checks that the daemon
// lets go of the calls. (A separate program: forking the test process, which
// runs gRPC threads, would copy them half-way.)
//
//   waiting_client TARGET CALLS
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "proto/grammard.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: waiting_client TARGET CALLS\n");
    return 2;
  }
  const int calls = std::atoi(argv[2]);
  auto stub = grammard::v1::Grammard::NewStub(
      grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  std::vector<std::thread> threads;
  for (int i = 0; i < calls; ++i) {
    threads.emplace_back([&stub, i] {
      grammard::v1::SyncGroupRequest request;
      request.set_group_id("g" + std::to_string(i));
      request.set_world_size(2);
      request.set_timeout_ms(4294967295u);
      grammard::v1::SyncGroupResponse response;
      grpc::ClientContext context;
      stub->SyncGroup(&context, request, &response);
    });
  }
  std::printf("waiting\n");
  std::fflush(stdout);
  for (;;) pause();
}
