// Renders the kustomize overlays and reads containers out of them (see
// overlay.h).
#include "deploy/testing/overlay.h"

#include <filesystem>
#include <map>
#include <regex>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "deploy/testing/deploy_testing.h"

namespace grammard::deploy {

using nlohmann::json;
// The JSON read here is deliberately not const: operator[] on a const json
// with a missing key is undefined behaviour, on a mutable one it yields null.

absl::StatusOr<std::vector<json>> RenderOverlay(const std::string& overlay) {
  const std::string kubectl = FindExecutable("kubectl");
  if (kubectl.empty()) {
    return absl::FailedPreconditionError(
        MissingToolMessage("kubectl", "renders the kustomize overlays"));
  }
  if (FindExecutable("yq").empty()) {
    return absl::FailedPreconditionError(
        MissingToolMessage("yq", "reads the rendered YAML as JSON"));
  }
  // kustomize refuses files that resolve outside the kustomization's root,
  // which runfile symlinks do: render a dereferenced copy.
  const std::string base = DeployFile("k8s/base/kustomization.yaml");
  if (base.empty()) {
    return absl::InternalError("deploy/k8s is not in the runfiles");
  }
  const std::filesystem::path source =
      std::filesystem::path(base).parent_path().parent_path();
  const std::string dir = MakeTempDir();
  const std::string copy = dir + "/k8s";
  std::error_code ec;
  std::filesystem::copy(source, copy, std::filesystem::copy_options::recursive,
                        ec);
  if (ec) return absl::InternalError("copying deploy/k8s: " + ec.message());
  absl::StatusOr<CommandResult> out =
      RunCommand({kubectl, "kustomize", copy + "/overlays/" + overlay});
  std::filesystem::remove_all(dir, ec);
  if (!out.ok()) return out.status();
  if (out->exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("kubectl kustomize overlays/", overlay, ": ", out->err));
  }
  return YamlStringDocuments(out->out);
}

std::vector<json*> OfKind(std::vector<json>& objects, const std::string& kind) {
  std::vector<json*> found;
  for (json& o : objects) {
    if (o.value("kind", "") == kind) found.push_back(&o);
  }
  return found;
}

json* Find(std::vector<json>& objects, const std::string& kind,
           const std::string& name) {
  for (json* o : OfKind(objects, kind)) {
    if ((*o)["metadata"].value("name", "") == name) return o;
  }
  return nullptr;
}

json* PodContainer(json& pod_spec, const std::string& name) {
  for (const char* key : {"initContainers", "containers"}) {
    if (!pod_spec.contains(key)) continue;
    for (json& c : pod_spec[key]) {
      if (c.value("name", "") == name) return &c;
    }
  }
  return nullptr;
}

absl::StatusOr<std::string> SecretValue(std::vector<json>& objects,
                                        const std::string& secret,
                                        const std::string& key) {
  json* s = Find(objects, "Secret", secret);
  if (s == nullptr || !(*s)["data"].contains(key)) {
    return absl::NotFoundError(
        absl::StrCat("no key ", key, " in Secret ", secret));
  }
  std::string value;
  if (!absl::Base64Unescape((*s)["data"][key].get<std::string>(), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Secret ", secret, " key ", key, " is not base64"));
  }
  return value;
}

absl::StatusOr<std::string> MountedSecretFile(std::vector<json>& objects,
                                              json& pod_spec, json& container,
                                              const std::string& path,
                                              int* mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = path.substr(0, slash), file = path.substr(slash + 1);
  std::string volume;
  for (json& m : container.value("volumeMounts", json::array())) {
    if (m.value("mountPath", "") == dir) volume = m.value("name", "");
  }
  for (json& v : pod_spec.value("volumes", json::array())) {
    if (volume.empty() || v.value("name", "") != volume ||
        !v.contains("secret")) {
      continue;
    }
    json& secret = v["secret"];
    *mode = secret.value("defaultMode", 0644);
    std::string key = file;
    for (json& item : secret.value("items", json::array())) {
      if (item.value("path", "") == file) key = item.value("key", "");
    }
    return SecretValue(objects, secret.value("secretName", ""), key);
  }
  return absl::NotFoundError(absl::StrCat(path, " is in no Secret volume ",
                                          container.value("name", ""),
                                          " mounts"));
}

absl::StatusOr<std::vector<std::string>> ExpandedArgs(
    std::vector<json>& objects, json& container) {
  std::map<std::string, std::string> env;
  for (json& from : container.value("envFrom", json::array())) {
    if (!from.contains("configMapRef")) continue;
    const std::string name = from["configMapRef"].value("name", "");
    json* map = Find(objects, "ConfigMap", name);
    if (map == nullptr) {
      return absl::InvalidArgumentError("envFrom names a missing ConfigMap " +
                                        name);
    }
    for (const auto& [key, value] : (*map)["data"].items()) {
      env[key] = value.get<std::string>();
    }
  }
  for (json& e : container.value("env", json::array())) {
    if (e.contains("value")) {
      env[e["name"]] = e["value"];
    } else if (e.contains("valueFrom") &&
               e["valueFrom"].contains("secretKeyRef")) {
      json& ref = e["valueFrom"]["secretKeyRef"];
      absl::StatusOr<std::string> value =
          SecretValue(objects, ref.value("name", ""), ref.value("key", ""));
      if (!value.ok()) return value.status();
      env[e["name"]] = *value;
    }
  }
  static const std::regex var(R"(\$\(([A-Za-z_][A-Za-z0-9_]*)\))");
  std::vector<std::string> args;
  for (json& a : container.value("args", json::array())) {
    std::string arg = a.get<std::string>(), out;
    auto last = arg.cbegin();
    for (std::sregex_iterator it(arg.begin(), arg.end(), var), end; it != end;
         ++it) {
      out.append(last, arg.cbegin() + it->position());
      const std::string name = (*it)[1];
      if (!env.count(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(arg, ": ", name, " is in no ConfigMap or Secret ",
                         container.value("name", ""), " reads"));
      }
      out += env[name];
      last = arg.cbegin() + it->position() + it->length();
    }
    out.append(last, arg.cend());
    args.push_back(out);
  }
  return args;
}

}  // namespace grammard::deploy
