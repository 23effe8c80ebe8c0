package resize

import (
	"encoding/json"
	"errors"

	batchv1 "k8s.io/api/batch/v1"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

type containerPatch struct {
	Name      string            `json:"name"`
	Resources resourcesPatchDoc `json:"resources"`
}

type resourcesPatchDoc struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
	Limits   corev1.ResourceList `json:"limits,omitempty"`
}

// containerLists are a pod spec's two lists of containers a resize sets
// (spec.containers; spec.initContainers, for sidecars only), as a strategic
// merge patch writes them: merged by name, initContainers left out when no
// sidecar changes.
type containerLists struct {
	Containers     []containerPatch `json:"containers"`
	InitContainers []containerPatch `json:"initContainers,omitempty"`
}

type podPatch struct {
	Spec struct {
		containerLists
		// Resources: the pod-level values (podlevel.go).
		Resources *resourcesPatchDoc `json:"resources,omitempty"`
	} `json:"spec"`
}

// BuildPatch returns a strategic merge patch for the pods/resize subresource
// that sets the cpu and memory requests and limits of target on the
// containers and sidecars whose values change. Containers are merged by
// name, sidecars within spec.initContainers; resources not named stay as
// they are.
func BuildPatch(pod *corev1.Pod, target resources.Resources) ([]byte, error) {
	var p podPatch
	p.Spec.containerLists = listsPatch(pod, target)
	p.Spec.Resources = podLevelPatch(pod, target)
	return json.Marshal(p)
}

// listsPatch returns what target changes in pod's containers and sidecars.
func listsPatch(pod *corev1.Pod, target resources.Resources) containerLists {
	out := containerLists{Containers: []containerPatch{}}
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		t, ok := target[c.Name]
		if !ok {
			continue
		}
		if resources.Equal(resources.Resources{c.Name: cpuMemory(c.Resources)}, resources.Resources{c.Name: t}) {
			continue
		}
		cp := containerPatch{
			Name:      c.Name,
			Resources: resourcesPatchDoc{Requests: t.Requests, Limits: t.Limits},
		}
		if ref.Sidecar {
			out.InitContainers = append(out.InitContainers, cp)
		} else {
			out.Containers = append(out.Containers, cp)
		}
	}
	return out
}

type jobPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec containerLists `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// BuildJobPatch returns a strategic merge patch of a Job that sets the cpu
// and memory requests and limits of target on the template's containers
// and sidecars whose values change (KEP-5440 lets a suspended Job's
// initContainers[*].resources change too), and nothing else: containers are merged by name and
// resources not named stay as they are. The patch carries the Job's
// resourceVersion, so that it fails with a conflict (and is decided again)
// rather than land on a Job that was resumed in the meantime, which the API
// server would refuse as an immutable template.
func BuildJobPatch(job *batchv1.Job, target resources.Resources) ([]byte, error) {
	var p jobPatch
	p.Metadata.ResourceVersion = job.ResourceVersion
	p.Spec.Template.Spec = listsPatch(&corev1.Pod{Spec: job.Spec.Template.Spec}, target)
	if len(p.Spec.Template.Spec.Containers) == 0 && len(p.Spec.Template.Spec.InitContainers) == 0 {
		return nil, errors.New("nothing to change in the pod template")
	}
	return json.Marshal(p)
}
