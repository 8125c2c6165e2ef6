// Renders every kustomize overlay (deploy/k8s/overlays/*) with `kubectl
// kustomize`, reads the objects through `yq`, and checks them structurally:
// grammard is a native sidecar with gRPC health probes on its gRPC port, every
// container has requests and limits and a non-root read-only security
// context, its flags exist and their ConfigMap values are there, the
// PodMonitor scrapes the sidecar's metrics port, the Redis overlay wires
// address, password file and Service together, and the PrometheusRule
// carries the same groups as deploy/prometheus/grammard_rules.yml, which
// `promtool check rules` accepts.
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "deploy/testing/deploy_testing.h"
#include "deploy/testing/overlay.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"

namespace grammard::deploy {
namespace {

using nlohmann::json;
// The JSON read here is deliberately not const: operator[] on a const json
// with a missing key is undefined behaviour, on a mutable one it yields null,
// so a malformed document fails a check instead of crashing the test.

const char* const kOverlays[] = {"local", "redis"};

// Rendered overlays by name, or why they are not (a skip or a failure).
struct Rendered {
  std::map<std::string, std::vector<json>> objects;
  std::string skip;
  std::string error;
};

Rendered RenderAll() {
  Rendered r;
  for (const char* overlay : kOverlays) {
    absl::StatusOr<std::vector<json>> objects = RenderOverlay(overlay);
    if (absl::IsFailedPrecondition(objects.status())) {
      r.skip = std::string(objects.status().message());
      return r;
    }
    if (!objects.ok()) {
      r.error = objects.status().ToString();
      return r;
    }
    r.objects[overlay] = *std::move(objects);
  }
  return r;
}

Rendered& Overlays() {
  static Rendered* rendered = new Rendered(RenderAll());
  return *rendered;
}

// The flags grammard accepts, from its --helpfull.
std::set<std::string> DaemonFlags() {
  std::set<std::string> flags;
  const std::string binary = testing::RunfilePath("service/grammard");
  if (binary.empty()) return flags;
  absl::StatusOr<CommandResult> r = RunCommand({binary, "--helpfull"});
  if (!r.ok()) return flags;
  static const std::regex flag(R"(^    --([A-Za-z0-9_]+) \()");
  for (absl::string_view line : absl::StrSplit(r->out + r->err, '\n')) {
    std::smatch m;
    const std::string s(line);
    if (std::regex_search(s, m, flag)) flags.insert(m[1]);
  }
  return flags;
}

// Every container and init container of a pod spec.
std::vector<json*> Containers(json& pod_spec) {
  std::vector<json*> all;
  for (const char* key : {"initContainers", "containers"}) {
    if (!pod_spec.contains(key)) continue;
    for (json& c : pod_spec[key]) all.push_back(&c);
  }
  return all;
}

// The containerPort of the port named `name`, or 0.
int PortNumber(json& container, const std::string& name) {
  for (json& p : container.value("ports", json::array())) {
    if (p.value("name", "") == name) return p.value("containerPort", 0);
  }
  return 0;
}

// The port of "host:port" (or "[v6]:port"), or 0.
int AddressPort(const std::string& address) {
  int port = 0;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return 0;
  }
  return port;
}

class ManifestsTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    Rendered& r = Overlays();
    if (!r.skip.empty()) GTEST_SKIP() << r.skip;
    ASSERT_TRUE(r.error.empty()) << r.error;
    objects_ = &r.objects.at(GetParam());
    deployment_ = Find(*objects_, "Deployment", "inference");
    ASSERT_NE(deployment_, nullptr) << "no Deployment inference";
    pod_ = &(*deployment_)["spec"]["template"]["spec"];
    for (json& c : (*pod_)["initContainers"]) {
      if (c.value("name", "") == "grammard") sidecar_ = &c;
    }
    ASSERT_NE(sidecar_, nullptr) << "grammard is not an init container";
  }

  // The sidecar's args with $(VAR) replaced from its ConfigMap-sourced
  // environment (as the kubelet does); an unknown variable is a failure.
  std::vector<std::string> SidecarArgs() const {
    absl::StatusOr<std::vector<std::string>> args =
        ExpandedArgs(*objects_, *sidecar_);
    EXPECT_TRUE(args.ok()) << args.status();
    return args.value_or(std::vector<std::string>());
  }

  // The value of --name=value in the expanded args, or nullopt.
  std::optional<std::string> Flag(const std::string& name) const {
    for (const std::string& a : SidecarArgs()) {
      if (absl::StartsWith(a, "--" + name + "=")) {
        return a.substr(name.size() + 3);
      }
    }
    return std::nullopt;
  }

  std::vector<json>* objects_ = nullptr;
  json* deployment_ = nullptr;
  json* pod_ = nullptr;
  json* sidecar_ = nullptr;
};

TEST_P(ManifestsTest, GrammardIsANativeSidecar) {
  EXPECT_EQ(sidecar_->value("restartPolicy", ""), "Always")
      << "without restartPolicy Always the init container must exit before "
         "the inference container starts";
  ASSERT_TRUE(pod_->contains("containers"));
  EXPECT_GE((*pod_)["containers"].size(), 1u);
  for (json& c : (*pod_)["containers"]) {
    EXPECT_NE(c.value("name", ""), "grammard");
  }
  EXPECT_EQ(PortNumber(*sidecar_, "grpc"), 50051);
  EXPECT_EQ(PortNumber(*sidecar_, "metrics"), 9464);
}

TEST_P(ManifestsTest, ProbesAskTheGrpcHealthServiceOnTheGrpcPort) {
  const int grpc_port = PortNumber(*sidecar_, "grpc");
  ASSERT_GT(grpc_port, 0) << "the sidecar has no port named grpc";
  for (const char* probe :
       {"startupProbe", "readinessProbe", "livenessProbe"}) {
    ASSERT_TRUE(sidecar_->contains(probe)) << "no " << probe;
    json& p = (*sidecar_)[probe];
    ASSERT_TRUE(p.contains("grpc")) << probe << " is not a gRPC probe";
    EXPECT_EQ(p["grpc"].value("port", 0), grpc_port) << probe;
    // Empty service: the server's overall health, which grammard sets.
    EXPECT_EQ(p["grpc"].value("service", ""), "") << probe;
    for (const char* other : {"httpGet", "tcpSocket", "exec"}) {
      EXPECT_FALSE(p.contains(other)) << probe;
    }
  }
  const std::optional<std::string> listen = Flag("listen");
  ASSERT_TRUE(listen.has_value()) << "no --listen";
  EXPECT_EQ(AddressPort(*listen), grpc_port) << *listen;
  EXPECT_FALSE(absl::StartsWith(*listen, "127.0.0.1"))
      << "the kubelet probes the pod IP";
}

TEST_P(ManifestsTest, EveryContainerHasRequestsAndLimits) {
  int checked = 0;
  for (const char* kind : {"Deployment", "StatefulSet", "DaemonSet"}) {
    for (json* w : OfKind(*objects_, kind)) {
      for (json* c : Containers((*w)["spec"]["template"]["spec"])) {
        ++checked;
        const std::string where =
            absl::StrCat(kind, " ", (*w)["metadata"].value("name", ""),
                         " container ", c->value("name", ""));
        ASSERT_TRUE(c->contains("resources")) << where;
        for (const char* side : {"requests", "limits"}) {
          ASSERT_TRUE((*c)["resources"].contains(side))
              << where << ": " << side;
          for (const char* r : {"cpu", "memory"}) {
            EXPECT_TRUE((*c)["resources"][side].contains(r))
                << where << ": no " << side << "." << r;
          }
        }
      }
    }
  }
  EXPECT_GE(checked, std::string(GetParam()) == "redis" ? 3 : 2);
}

TEST_P(ManifestsTest, ContainersRunNonRootOnAReadOnlyRoot) {
  for (const char* kind : {"Deployment", "StatefulSet", "DaemonSet"}) {
    for (json* w : OfKind(*objects_, kind)) {
      json& pod = (*w)["spec"]["template"]["spec"];
      json pod_security = pod.value("securityContext", json::object());
      for (json* c : Containers(pod)) {
        const std::string where = absl::StrCat(
            (*w)["metadata"].value("name", ""), "/", c->value("name", ""));
        json sc = c->value("securityContext", json::object());
        const bool non_root = sc.contains("runAsNonRoot")
                                  ? sc["runAsNonRoot"].get<bool>()
                                  : pod_security.value("runAsNonRoot", false);
        EXPECT_TRUE(non_root) << where << ": runAsNonRoot";
        EXPECT_TRUE(sc.value("readOnlyRootFilesystem", false)) << where;
        EXPECT_FALSE(sc.value("allowPrivilegeEscalation", true)) << where;
        json drop = sc.contains("capabilities")
                        ? sc["capabilities"].value("drop", json::array())
                        : json::array();
        EXPECT_NE(std::find(drop.begin(), drop.end(), "ALL"), drop.end())
            << where << ": capabilities.drop ALL";
        EXPECT_GT(sc.value("runAsUser", pod_security.value("runAsUser", 0)), 0)
            << where << ": a uid other than 0";
      }
    }
  }
  json sc = (*sidecar_)["securityContext"];
  EXPECT_EQ(sc.value("runAsUser", 0), 65532);
}

TEST_P(ManifestsTest, SidecarMountsTokenizersAndAWritableTmp) {
  std::map<std::string, json*> volumes;
  for (json& v : (*pod_)["volumes"]) {
    volumes[v.value("name", "")] = &v;
  }
  std::map<std::string, std::string> mounts;  // path -> volume
  for (json& m : sidecar_->value("volumeMounts", json::array())) {
    mounts[m.value("mountPath", "")] = m.value("name", "");
    EXPECT_TRUE(volumes.count(m.value("name", "")))
        << "mount of a missing volume " << m.value("name", "");
  }
  ASSERT_TRUE(mounts.count("/tokenizers"));
  ASSERT_TRUE(mounts.count("/tmp"));
  EXPECT_EQ(Flag("tokenizer_dir").value_or(""), "/tokenizers");
  json* tmp = volumes[mounts["/tmp"]];
  ASSERT_NE(tmp, nullptr);
  EXPECT_TRUE(tmp->contains("emptyDir")) << "/tmp should be an emptyDir";
  json* tokenizers = volumes[mounts["/tokenizers"]];
  ASSERT_NE(tokenizers, nullptr);
  if (tokenizers->contains("persistentVolumeClaim")) {
    const std::string claim =
        (*tokenizers)["persistentVolumeClaim"].value("claimName", "");
    EXPECT_NE(Find(*objects_, "PersistentVolumeClaim", claim), nullptr)
        << "no PersistentVolumeClaim " << claim;
  }
}

TEST_P(ManifestsTest, SidecarFlagsAreTheDaemonsAndComeFromTheConfigMap) {
  const std::set<std::string> flags = DaemonFlags();
  ASSERT_GT(flags.size(), 5u) << "grammard --helpfull listed no flags";
  bool from_config_map = false;
  for (json& a : sidecar_->value("args", json::array())) {
    if (absl::StrContains(a.get<std::string>(), "$(")) from_config_map = true;
  }
  EXPECT_TRUE(from_config_map) << "no flag takes its value from the ConfigMap";
  for (const std::string& arg : SidecarArgs()) {
    ASSERT_TRUE(absl::StartsWith(arg, "--")) << arg;
    const std::string name = arg.substr(2, arg.find('=') - 2);
    EXPECT_TRUE(flags.count(name))
        << arg << ": grammard has no flag --" << name;
    EXPECT_NE(arg.find('='), std::string::npos) << arg;
    EXPECT_NE(arg.back(), '=') << arg << ": empty value";
  }
}

TEST_P(ManifestsTest, PodMonitorScrapesTheSidecarsMetricsPort) {
  const auto monitors = OfKind(*objects_, "PodMonitor");
  ASSERT_EQ(monitors.size(), 1u);
  json& spec = (*monitors[0])["spec"];
  json labels = (*deployment_)["spec"]["template"]["metadata"]["labels"];
  ASSERT_TRUE(spec["selector"].contains("matchLabels"));
  for (const auto& [key, value] : spec["selector"]["matchLabels"].items()) {
    EXPECT_EQ(labels.value(key, ""), value.get<std::string>())
        << "the PodMonitor selects " << key << "=" << value
        << ", which the inference pods do not carry";
  }
  ASSERT_EQ(spec["podMetricsEndpoints"].size(), 1u);
  json& endpoint = spec["podMetricsEndpoints"][0];
  const std::string port = endpoint.value("port", "");
  const int number = PortNumber(*sidecar_, port);
  EXPECT_GT(number, 0) << "the PodMonitor scrapes port \"" << port
                       << "\", which the sidecar does not name";
  EXPECT_EQ(AddressPort(Flag("metrics_listen").value_or("")), number);
  EXPECT_EQ(endpoint.value("path", "/metrics"), "/metrics");
  // No other container of the pod names a port the same way.
  for (json& c : (*pod_)["containers"]) {
    EXPECT_EQ(PortNumber(c, port), 0) << c.value("name", "");
  }
}

TEST_P(ManifestsTest, RedisOnlyInTheRedisOverlayAndWiredThrough) {
  const std::optional<std::string> redis = Flag("redis");
  if (std::string(GetParam()) != "redis") {
    EXPECT_FALSE(redis.has_value()) << "the local overlay uses no Redis";
    EXPECT_EQ(Find(*objects_, "Deployment", "redis"), nullptr);
    return;
  }
  ASSERT_TRUE(redis.has_value()) << "no --redis";
  EXPECT_EQ(*redis, "redis:6379");
  EXPECT_EQ(Flag("redis_prefix").value_or(""), "grammard:");
  // The address names the Service, on its port.
  json* service = Find(*objects_, "Service", "redis");
  ASSERT_NE(service, nullptr);
  bool port_found = false;
  for (json& p : (*service)["spec"]["ports"]) {
    if (p.value("port", 0) == AddressPort(*redis)) port_found = true;
  }
  EXPECT_TRUE(port_found);
  json* redis_deployment = Find(*objects_, "Deployment", "redis");
  ASSERT_NE(redis_deployment, nullptr);
  json pod_labels =
      (*redis_deployment)["spec"]["template"]["metadata"]["labels"];
  for (const auto& [key, value] : (*service)["spec"]["selector"].items()) {
    EXPECT_EQ(pod_labels.value(key, ""), value.get<std::string>());
  }
  // The password file lies in a mounted Secret holding that key.
  const std::string file = Flag("redis_password_file").value_or("");
  ASSERT_EQ(file, "/etc/grammard/redis/password");
  std::string volume_name;
  for (json& m : sidecar_->value("volumeMounts", json::array())) {
    const std::string path = m.value("mountPath", "");
    if (absl::StartsWith(file, path + "/")) {
      volume_name = m.value("name", "");
      EXPECT_TRUE(m.value("readOnly", false));
    }
  }
  ASSERT_FALSE(volume_name.empty()) << file << " is in no mounted volume";
  json* volume = nullptr;
  for (json& v : (*pod_)["volumes"]) {
    if (v.value("name", "") == volume_name) volume = &v;
  }
  ASSERT_NE(volume, nullptr);
  ASSERT_TRUE(volume->contains("secret")) << "the password is not a Secret";
  const std::string secret_name = (*volume)["secret"].value("secretName", "");
  json* secret = Find(*objects_, "Secret", secret_name);
  ASSERT_NE(secret, nullptr) << "no Secret " << secret_name;
  const std::string key = file.substr(file.rfind('/') + 1);
  bool mapped = false;
  for (json& item : (*volume)["secret"].value("items", json::array())) {
    if (item.value("path", "") == key) {
      mapped = true;
      EXPECT_TRUE((*secret)["data"].contains(item.value("key", "")));
    }
  }
  if (!mapped) {
    EXPECT_TRUE((*secret)["data"].contains(key));
  }
  // Readable by the sidecar's group, no one else.
  const int mode = (*volume)["secret"].value("defaultMode", 0644);
  EXPECT_EQ(mode & 07, 0) << "the password file is world-readable";
  EXPECT_EQ((*pod_)["securityContext"].value("fsGroup", 0),
            (*sidecar_)["securityContext"].value("runAsGroup", -1));
  // Redis itself requires that password.
  bool uses_secret = false;
  for (json& e :
       (*redis_deployment)["spec"]["template"]["spec"]["containers"][0].value(
           "env", json::array())) {
    if (e.contains("valueFrom") && e["valueFrom"].contains("secretKeyRef") &&
        e["valueFrom"]["secretKeyRef"].value("name", "") == secret_name) {
      uses_secret = true;
    }
  }
  EXPECT_TRUE(uses_secret) << "Redis does not read the grammard-redis Secret";
}

// Every container names an image with a tag; the sidecar's is the
// repository tools/build_image.sh tags (grammard), which the base's `images`
// points at a registry.
TEST_P(ManifestsTest, EveryContainerHasATaggedImage) {
  for (const char* kind : {"Deployment", "StatefulSet", "DaemonSet"}) {
    for (json* w : OfKind(*objects_, kind)) {
      for (json* c : Containers((*w)["spec"]["template"]["spec"])) {
        const std::string image = c->value("image", "");
        const std::string where = absl::StrCat(
            (*w)["metadata"].value("name", ""), "/", c->value("name", ""));
        EXPECT_FALSE(image.empty()) << where << " has no image";
        const size_t slash = image.rfind('/');
        EXPECT_NE(image.find(':', slash == std::string::npos ? 0 : slash),
                  std::string::npos)
            << where << ": " << image << " has no tag";
      }
    }
  }
  const std::string image = sidecar_->value("image", "");
  EXPECT_TRUE(absl::StrContains(image, "/grammard:")) << image;
}

// kubectl decodes every object of a built-in kind into its typed API (a
// misplaced or mistyped field fails here) and edits them offline
// (`--local`): a label on each, and the sidecar's image, as a deploy of a
// locally built image would set it.
TEST_P(ManifestsTest, KubectlEditsTheBuiltInKindsOffline) {
  const std::string kubectl = FindExecutable("kubectl");
  ASSERT_FALSE(kubectl.empty());
  const std::string dir = MakeTempDir();
  std::ofstream all(dir + "/built_in.yaml"),
      deployment(dir + "/inference.yaml");
  int built_in = 0;
  for (json& o : *objects_) {
    // The Prometheus Operator's kinds are custom resources kubectl cannot
    // decode without their definitions.
    if (absl::StrContains(o.value("apiVersion", ""), ".coreos.com/")) continue;
    all << "---\n" << o.dump() << "\n";
    ++built_in;
  }
  deployment << deployment_->dump() << "\n";
  all.close();
  deployment.close();
  EXPECT_GE(built_in, 3);  // Deployment, ConfigMap, PersistentVolumeClaim
  absl::StatusOr<CommandResult> labelled =
      RunCommand({kubectl, "label", "--local", "-f", dir + "/built_in.yaml",
                  "grammard.test/edited=yes", "-o", "name"});
  ASSERT_TRUE(labelled.ok()) << labelled.status();
  EXPECT_EQ(labelled->exit_code, 0) << labelled->err;
  EXPECT_EQ(std::count(labelled->out.begin(), labelled->out.end(), '\n'),
            built_in)
      << labelled->out;
  absl::StatusOr<CommandResult> set = RunCommand(
      {kubectl, "set", "image", "--local", "-f", dir + "/inference.yaml",
       "grammard=localhost/grammard:test", "-o", "json"});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->exit_code, 0) << set->err;
  json edited = json::parse(set->out, nullptr, false);
  json* sidecar = PodContainer(edited["spec"]["template"]["spec"], "grammard");
  ASSERT_NE(sidecar, nullptr) << set->out;
  EXPECT_EQ(sidecar->value("image", ""), "localhost/grammard:test");
}

TEST_P(ManifestsTest, PrometheusRuleHasTheRulesFilesGroups) {
  const auto rules = OfKind(*objects_, "PrometheusRule");
  ASSERT_EQ(rules.size(), 1u);
  absl::StatusOr<std::vector<json>> file =
      YamlDocuments(DeployFile("prometheus/grammard_rules.yml"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->size(), 1u);
  EXPECT_EQ((*rules[0])["spec"]["groups"], (*file)[0]["groups"])
      << "deploy/k8s/base/prometheusrule.yaml and "
         "deploy/prometheus/grammard_rules.yml differ";
}

INSTANTIATE_TEST_SUITE_P(Overlays, ManifestsTest,
                         ::testing::ValuesIn(kOverlays));

TEST(RulesFileTest, PromtoolAcceptsIt) {
  const std::string promtool = FindExecutable("promtool");
  if (promtool.empty()) {
    GTEST_SKIP() << MissingToolMessage("promtool", "checks the alerting rules");
  }
  const std::string file = DeployFile("prometheus/grammard_rules.yml");
  ASSERT_FALSE(file.empty());
  absl::StatusOr<CommandResult> r =
      RunCommand({promtool, "check", "rules", file});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
}

// The alerts the issue asks for, each with a severity, the annotations
// Alertmanager templates use, and a runbook section in deploy/README.md.
TEST(RulesFileTest, AlertsHaveSeverityAnnotationsAndARunbook) {
  if (FindExecutable("yq").empty()) {
    GTEST_SKIP() << MissingToolMessage("yq", "reads the rules file");
  }
  absl::StatusOr<std::vector<json>> file =
      YamlDocuments(DeployFile("prometheus/grammard_rules.yml"));
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::string> readme = ReadFile(DeployFile("README.md"));
  ASSERT_TRUE(readme.ok()) << readme.status();
  // GitHub's anchors: headings lower-cased.
  std::set<std::string> anchors;
  for (absl::string_view line : absl::StrSplit(*readme, '\n')) {
    if (!absl::StartsWith(line, "#")) continue;
    std::string heading(absl::StripLeadingAsciiWhitespace(
        line.substr(line.find_first_not_of('#'))));
    std::string anchor;
    for (char c : heading) {
      if (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
        anchor += static_cast<char>(tolower(c));
      } else if (c == ' ') {
        anchor += '-';
      }
    }
    anchors.insert(anchor);
  }
  std::set<std::string> alerts;
  for (json& group : (*file)[0]["groups"]) {
    for (json& rule : group["rules"]) {
      if (!rule.contains("alert")) continue;
      const std::string name = rule["alert"];
      alerts.insert(name);
      const std::string severity =
          rule.value("labels", json::object()).value("severity", "");
      EXPECT_TRUE(severity == "warning" || severity == "critical")
          << name << ": severity \"" << severity << "\"";
      json annotations = rule.value("annotations", json::object());
      for (const char* a : {"summary", "description", "runbook_url"}) {
        EXPECT_FALSE(annotations.value(a, "").empty()) << name << ": no " << a;
      }
      const std::string runbook = annotations.value("runbook_url", "");
      const size_t hash = runbook.find('#');
      ASSERT_NE(hash, std::string::npos) << name << ": " << runbook;
      EXPECT_TRUE(anchors.count(runbook.substr(hash + 1)))
          << name << ": deploy/README.md has no section #"
          << runbook.substr(hash + 1);
      EXPECT_TRUE(rule.contains("for")) << name << " fires on one evaluation";
    }
  }
  for (const char* wanted :
       {"GrammardCompileFailures", "GrammardStepLatencyHigh",
        "GrammardCacheHitRatioLow", "GrammardRedisBreakerOpen"}) {
    EXPECT_TRUE(alerts.count(wanted)) << "no alert " << wanted;
  }
}

}  // namespace
}  // namespace grammard::deploy
