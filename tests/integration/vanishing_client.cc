// A client that vanishes: opens --sequences sequences on one Decode stream,
// waits until they are ready, prints "ready" and then blocks until it is
// killed, never closing anything. decode_test kills it (SIGKILL) and checks
// that the daemon reclaims its sequences.
//
//   vanishing_client TARGET SEQUENCES
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/grammard.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: vanishing_client TARGET SEQUENCES\n");
    return 2;
  }
  const int sequences = std::atoi(argv[2]);
  auto stub = grammard::v1::Grammard::NewStub(
      grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto rw = stub->Decode(&context);
  for (int id = 1; id <= sequences; ++id) {
    grammard::v1::DecodeRequest open;
    open.mutable_open()->set_sequence_id(static_cast<uint64_t>(id));
    open.mutable_open()->set_tokenizer("llama3");
    open.mutable_open()->mutable_constraint()->set_regex("[a-z]+");
    if (!rw->Write(open)) return 1;
  }
  grammard::v1::DecodeResponse response;
  for (int ready = 0; ready < sequences;) {
    if (!rw->Read(&response)) return 1;
    if (response.has_status()) ++ready;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}
