package resize

import (
	"encoding/json"
	"errors"

	batchv1 "k8s.io/api/batch/v1"

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
		// Resources: the pod-level values (podlevel.go).
		Resources *resourcesPatchDoc `json:"resources,omitempty"`
	} `json:"spec"`
}

// BuildPatch returns a strategic merge patch for the pods/resize subresource
// that sets the cpu and memory requests and limits of target on the
// containers whose values change. Containers are merged by name;
// resources not named stay as they are.
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
	p.Spec.Resources = podLevelPatch(pod, target)
	return json.Marshal(p)
}

type jobPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []containerPatch `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// BuildJobPatch returns a strategic merge patch of a Job that sets the cpu
// and memory requests and limits of target on the template's containers
// whose values change, and nothing else: containers are merged by name and
// resources not named stay as they are. The patch carries the Job's
// resourceVersion, so that it fails with a conflict (and is decided again)
// rather than land on a Job that was resumed in the meantime, which the API
// server would refuse as an immutable template.
func BuildJobPatch(job *batchv1.Job, target resources.Resources) ([]byte, error) {
	var p jobPatch
	p.Metadata.ResourceVersion = job.ResourceVersion
	p.Spec.Template.Spec.Containers = []containerPatch{}
	for _, c := range job.Spec.Template.Spec.Containers {
		t, ok := target[c.Name]
		if !ok {
			continue
		}
		if resources.Equal(resources.Resources{c.Name: cpuMemory(c.Resources)}, resources.Resources{c.Name: t}) {
			continue
		}
		p.Spec.Template.Spec.Containers = append(p.Spec.Template.Spec.Containers, containerPatch{
			Name:      c.Name,
			Resources: resourcesPatchDoc{Requests: t.Requests, Limits: t.Limits},
		})
	}
	if len(p.Spec.Template.Spec.Containers) == 0 {
		return nil, errors.New("nothing to change in the pod template")
	}
	return json.Marshal(p)
}
