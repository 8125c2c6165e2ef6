// Podman from tests (see podman.h).
#include "deploy/testing/podman.h"

#include <unistd.h>

#include <cstdlib>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "deploy/testing/deploy_testing.h"

namespace grammard::deploy {

absl::StatusOr<Podman> Podman::Find() {
  const std::string binary = FindExecutable("podman");
  if (binary.empty()) {
    return absl::FailedPreconditionError(
        "podman not found on PATH: the image cannot be built or run "
        "(tools/setup.sh installs podman, runc and debootstrap)");
  }
  if (FindExecutable("runc").empty()) {
    return absl::FailedPreconditionError(
        "runc not found on PATH: deploy/podman/containers.conf runs "
        "containers with it (tools/setup.sh installs it)");
  }
  if (std::getenv("CONTAINERS_CONF") == nullptr) {
    const std::string conf = DeployFile("podman/containers.conf");
    if (conf.empty()) {
      return absl::InternalError(
          "deploy/podman/containers.conf is not a runfile (list it as data)");
    }
    setenv("CONTAINERS_CONF", conf.c_str(), 1);
  }
  Podman podman(binary);
  absl::StatusOr<std::string> info =
      podman.Run({"info", "--format", "{{.Host.OCIRuntime.Name}}"});
  if (!info.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("podman is installed but does not work (it needs root "
                     "here): ",
                     info.status().message()));
  }
  return podman;
}

absl::StatusOr<CommandResult> Podman::Command(
    const std::vector<std::string>& args, std::chrono::seconds timeout) const {
  std::vector<std::string> argv = {binary_};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<CommandResult> r = RunCommand(argv, timeout);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("podman ", absl::StrJoin(args, " "), ": ",
                                     r.status().message()));
  }
  return r;
}

absl::StatusOr<std::string> Podman::Run(const std::vector<std::string>& args,
                                        std::chrono::seconds timeout) const {
  absl::StatusOr<CommandResult> r = Command(args, timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InternalError(absl::StrCat("podman ", absl::StrJoin(args, " "),
                                            " exited ", r->exit_code, ": ",
                                            r->err));
  }
  return r->out;
}

std::string UniqueName(const std::string& prefix) {
  std::random_device random;
  return absl::StrCat(prefix, "-", getpid(), "-", random() % 1000000);
}

absl::StatusOr<std::unique_ptr<Container>> Container::Start(
    const Podman& podman, const std::string& name,
    const std::vector<std::string>& options, const std::string& image,
    const std::vector<std::string>& args) {
  std::vector<std::string> run = {"run", "-d", "--name", name};
  run.insert(run.end(), options.begin(), options.end());
  run.push_back(image);
  run.insert(run.end(), args.begin(), args.end());
  // Removed even when `podman run` fails half-way (created, not started).
  std::unique_ptr<Container> c(new Container(podman, name));
  absl::StatusOr<std::string> id = podman.Run(run);
  if (!id.ok()) return id.status();
  return c;
}

Container::~Container() {
  podman_.Run({"rm", "-f", "-t", "0", name_}).IgnoreError();
}

absl::StatusOr<int> Container::HostPort(int container_port) const {
  absl::StatusOr<std::string> out =
      podman_.Run({"port", name_, absl::StrCat(container_port, "/tcp")});
  if (!out.ok()) return out.status();
  // "127.0.0.1:43211"
  absl::string_view line = absl::StripAsciiWhitespace(*out);
  int port = 0;
  const size_t colon = line.rfind(':');
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(line.substr(colon + 1), &port)) {
    return absl::InternalError(absl::StrCat("podman port ", name_, " ",
                                            container_port, " printed ", line));
  }
  return port;
}

absl::StatusOr<std::string> Container::Inspect(
    const std::string& format) const {
  absl::StatusOr<std::string> out =
      podman_.Run({"inspect", "--format", format, name_});
  if (!out.ok()) return out.status();
  return std::string(absl::StripAsciiWhitespace(*out));
}

std::string Container::Logs() const {
  absl::StatusOr<CommandResult> r = podman_.Command({"logs", name_});
  if (!r.ok()) return std::string(r.status().message());
  return r->out + r->err;
}

}  // namespace grammard::deploy
