// Podman driven from deploy/'s tests: finding it (and the containers.conf
// these machines need), running its commands with a deadline, and containers
// that are removed when the test lets go of them.
//
//   absl::StatusOr<Podman> podman = Podman::Find();
//   auto c = Container::Start(*podman, UniqueName("grammard-test"),
//                             {"-p", "127.0.0.1::50051"}, "grammard:v1", {});
//   absl::StatusOr<int> port = (*c)->HostPort(50051);
//
// Cost: each call is a `podman` process (tens of milliseconds; `podman run`
// about a second). Thread-safety: none needed (one test thread).
#ifndef GRAMMARD_DEPLOY_TESTING_PODMAN_H_
#define GRAMMARD_DEPLOY_TESTING_PODMAN_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deploy/testing/deploy_testing.h"

namespace grammard::deploy {

class Podman {
 public:
  // Podman, once `podman info` answers. Points CONTAINERS_CONF at the
  // runfile deploy/podman/containers.conf unless it is set. An error naming
  // what is missing or what podman said otherwise: tests that need Podman
  // fail on it rather than skip, since CI installs it (tools/setup.sh).
  static absl::StatusOr<Podman> Find();

  // `podman <args>`: its stdout, or an error with its stderr when it exits
  // non-zero or runs past `timeout`.
  absl::StatusOr<std::string> Run(
      const std::vector<std::string>& args,
      std::chrono::seconds timeout = std::chrono::seconds(120)) const;
  // The same, whatever its exit status: both outputs and the status.
  absl::StatusOr<CommandResult> Command(
      const std::vector<std::string>& args,
      std::chrono::seconds timeout = std::chrono::seconds(120)) const;

 private:
  explicit Podman(std::string binary) : binary_(std::move(binary)) {}
  std::string binary_;
};

// A container name no other test run uses: <prefix>-<pid>-<random>.
std::string UniqueName(const std::string& prefix);

// A detached container (`podman run -d --name <name> <options> <image>
// <args>`), removed with `podman rm -f` by the destructor.
class Container {
 public:
  static absl::StatusOr<std::unique_ptr<Container>> Start(
      const Podman& podman, const std::string& name,
      const std::vector<std::string>& options, const std::string& image,
      const std::vector<std::string>& args);
  ~Container();
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  const std::string& name() const { return name_; }
  // The host port publishing `container_port` (run with -p 127.0.0.1::PORT).
  absl::StatusOr<int> HostPort(int container_port) const;
  // `podman inspect --format <format>` of the container, trimmed.
  absl::StatusOr<std::string> Inspect(const std::string& format) const;
  // What it printed (stdout and stderr), or why that cannot be read.
  std::string Logs() const;

 private:
  Container(const Podman& podman, std::string name)
      : podman_(podman), name_(std::move(name)) {}
  Podman podman_;
  std::string name_;
};

}  // namespace grammard::deploy

#endif  // GRAMMARD_DEPLOY_TESTING_PODMAN_H_
