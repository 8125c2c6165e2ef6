// The kustomize overlays (deploy/k8s/overlays/<name>) rendered as a cluster
// would receive them, and what a container engine needs from them to run a
// container as its pod would: a workload's objects by kind and name, and a
// container's args with $(VAR) replaced from its environment as the kubelet
// does (ConfigMaps through envFrom, literal env values, Secret keys).
//
// Cost: one `kubectl kustomize` and one `yq` per render (about a second).
// Thread-safety: none needed (one test thread); no shared state.
#ifndef GRAMMARD_DEPLOY_TESTING_OVERLAY_H_
#define GRAMMARD_DEPLOY_TESTING_OVERLAY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace grammard::deploy {

// Every object `kubectl kustomize` renders for the overlay. FailedPrecondition
// (with MissingToolMessage's words) when kubectl or yq is missing; Internal
// when deploy/k8s is not in the runfiles or the render fails.
absl::StatusOr<std::vector<nlohmann::json>> RenderOverlay(
    const std::string& overlay);

// The objects of one kind; the one of that kind and name (null if none).
std::vector<nlohmann::json*> OfKind(std::vector<nlohmann::json>& objects,
                                    const std::string& kind);
nlohmann::json* Find(std::vector<nlohmann::json>& objects,
                     const std::string& kind, const std::string& name);

// The pod spec's container (or init container) named `name`; null if none.
nlohmann::json* PodContainer(nlohmann::json& pod_spec, const std::string& name);

// The container's args with every $(VAR) replaced from its environment;
// InvalidArgument naming the variable when one has no value there.
absl::StatusOr<std::vector<std::string>> ExpandedArgs(
    std::vector<nlohmann::json>& objects, nlohmann::json& container);

// The decoded value of a Secret's key; NotFound if absent.
absl::StatusOr<std::string> SecretValue(std::vector<nlohmann::json>& objects,
                                        const std::string& secret,
                                        const std::string& key);

// What `container` of `pod_spec` reads at `path` when that file comes from a
// Secret volume it mounts (its mode in `mode`); NotFound otherwise.
absl::StatusOr<std::string> MountedSecretFile(
    std::vector<nlohmann::json>& objects, nlohmann::json& pod_spec,
    nlohmann::json& container, const std::string& path, int* mode);

}  // namespace grammard::deploy

#endif  // GRAMMARD_DEPLOY_TESTING_OVERLAY_H_
