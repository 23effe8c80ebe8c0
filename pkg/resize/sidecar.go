package resize

import (
	"fmt"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
)

// Native sidecars (init containers with restartPolicy Always) are resized
// as app containers are, through the same pods/resize request: their entry
// of spec.initContainers, merged by name, and their status in
// status.initContainerStatuses (recommendation.Containers and Status find
// both). Every rule of app containers holds for them, by version:
//
//   - 1.33 and later accept their cpu and memory changes (kubernetes
//     #128367); 1.32 forbids them. Other resources are immutable
//     ("only cpu and memory resources for sidecar containers are
//     mutable").
//   - Requests and limits cannot be removed, the pod's QoS class (which
//     counts init containers) cannot change, and on 1.33 a memory limit
//     cannot be lowered or added unless its resizePolicy is
//     RestartContainer: Validate checks them on sidecars as on containers.
//   - From 1.34 the kubelet refuses to lower a sidecar's memory limit below
//     its usage as it does a container's (memory.go holds it the same way).
//   - A sidecar whose changed resource has resizePolicy RestartContainer is
//     restarted by the kubelet: the resize is disruptive and waits for the
//     disruption budget.
//   - A sidecar adds its requests to the pod's, for the scheduler and the
//     kubelet's admission: fits-node counts it (resourcehelper.PodRequests).
//
// Init containers that are not sidecars are never in a target: the
// recommendation processing leaves them out (recommendation.Containers).
// From 1.36 the API server accepts resizing them while they run (gate
// InPlacePodVerticalScalingInitContainers, beta 1.36, GA 1.37), but they
// run before any app container: there is nothing to resize by the time a
// recommendation exists for the pod, and a new pod gets no value for them
// either.

// firstSidecarMinor is the first minor version that resizes sidecars in
// place.
const firstSidecarMinor = 33

// validateSidecar returns why ref cannot be resized in place on the API
// server of serverMinor (0: unknown, left to the API server), "" when it
// can.
func validateSidecar(ref recommendation.Ref, serverMinor int) string {
	if !ref.Sidecar || serverMinor == 0 || serverMinor >= firstSidecarMinor {
		return ""
	}
	return fmt.Sprintf("%s: Kubernetes 1.%d cannot resize sidecars in place (1.%d can)", label(ref), serverMinor, firstSidecarMinor)
}

// label names a container for messages: "container app", "sidecar proxy".
func label(ref recommendation.Ref) string {
	if ref.Sidecar {
		return "sidecar " + ref.Container.Name
	}
	return "container " + ref.Container.Name
}
