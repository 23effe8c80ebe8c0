package resize

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

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

type podPatch struct {
	Spec struct {
		Containers []containerPatch `json:"containers"`
	} `json:"spec"`
}

// BuildPatch returns a strategic merge patch for the pods/resize subresource
// that sets the cpu and memory requests and limits of target on the
// containers whose values change. Containers are merged by name; resources
// not named stay as they are.
func BuildPatch(pod *corev1.Pod, target resources.Resources) ([]byte, error) {
	var p podPatch
	p.Spec.Containers = []containerPatch{}
	for _, c := range pod.Spec.Containers {
		t, ok := target[c.Name]
		if !ok {
			continue
		}
		if resources.Equal(resources.Resources{c.Name: cpuMemory(c.Resources)}, resources.Resources{c.Name: t}) {
			continue
		}
		p.Spec.Containers = append(p.Spec.Containers, containerPatch{
			Name:      c.Name,
			Resources: resourcesPatchDoc{Requests: t.Requests, Limits: t.Limits},
		})
	}
	return json.Marshal(p)
}
