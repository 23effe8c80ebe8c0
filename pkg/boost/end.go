package boost

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// MaxAnnotationBytes bounds the boost annotation read: four quantities and
// their keys take well under a hundred bytes.
const MaxAnnotationBytes = 1024

// Containers returns the containers of pod that carry a boost annotation,
// in the pod's order. Annotations naming no container of the pod are
// ignored.
func Containers(pod *corev1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.Containers {
		if _, ok := pod.Annotations[AnnotationKey(c.Name)]; ok {
			out = append(out, c.Name)
		}
	}
	return out
}

// Active tells whether any container of pod carries a boost annotation.
func Active(pod *corev1.Pod) bool {
	for k := range pod.Annotations {
		if strings.HasPrefix(k, AnnotationPrefix) {
			return len(Containers(pod)) > 0
		}
	}
	return false
}

// Original reads the boost annotation of container: the cpu and memory
// requests and limits it had without the boost. The annotation is untrusted
// input (whoever creates the pod may write it): it is bounded in size, only
// cpu and memory are read, and each quantity is checked on its string
// before it is parsed. ok is false when there is no annotation.
func Original(pod *corev1.Pod, container string) (requests, limits corev1.ResourceList, ok bool, err error) {
	value, ok := pod.Annotations[AnnotationKey(container)]
	if !ok {
		return nil, nil, false, nil
	}
	if len(value) > MaxAnnotationBytes {
		return nil, nil, true, fmt.Errorf("boost annotation of container %s: %d bytes, more than %d", container, len(value), MaxAnnotationBytes)
	}
	var raw struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	}
	if err := json.Unmarshal([]byte(value), &raw); err != nil {
		return nil, nil, true, fmt.Errorf("boost annotation of container %s: %w", container, err)
	}
	if requests, err = parseList(raw.Requests); err != nil {
		return nil, nil, true, fmt.Errorf("boost annotation of container %s, requests: %w", container, err)
	}
	if limits, err = parseList(raw.Limits); err != nil {
		return nil, nil, true, fmt.Errorf("boost annotation of container %s, limits: %w", container, err)
	}
	return requests, limits, true, nil
}

func parseList(raw map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, s := range raw {
		if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) {
			continue
		}
		q, err := quantity.Parse(s)
		if err != nil {
			return nil, err
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// Due tells which boosts of pod are over at now, and how long until the
// next one is: a boost ends Duration(vpa, container) after the pod became
// Ready (the last transition of its Ready condition to True). A pod that is
// not Ready keeps its boost: it still starts. next is 0 when no boost is
// left to end later.
func Due(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, now time.Time) (ended []string, next time.Duration) {
	var readySince time.Time
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			readySince = c.LastTransitionTime.Time
		}
	}
	if readySince.IsZero() {
		return nil, 0
	}
	for _, name := range Containers(pod) {
		left := readySince.Add(Duration(vpa, name)).Sub(now)
		if left <= 0 {
			ended = append(ended, name)
			continue
		}
		if next == 0 || left < next {
			next = left
		}
	}
	sort.Strings(ended)
	return ended, next
}

// EndDesired is what the containers of a boosted pod are resized to when
// the boosts of the containers in ended are over, given desired, what the
// VPA recommends for the pod. A container whose boost is over gets its
// recommendation; without one for its CPU, the CPU request and limit its
// boost annotation recorded. A container still boosted is left out, so that
// it keeps what it has; the other containers keep their recommendation. A
// container whose boost is over and that has neither a recommendation nor a
// readable annotation is left out as well, its error in errs: nothing is
// known to lower it to.
func EndDesired(pod *corev1.Pod, desired recommendation.Desired, ended []string) (out recommendation.Desired, errs []error) {
	out = make(recommendation.Desired, len(desired))
	for name, c := range desired {
		out[name] = c
	}
	over := map[string]bool{}
	for _, name := range ended {
		over[name] = true
	}
	for _, name := range Containers(pod) {
		if !over[name] {
			delete(out, name)
			continue
		}
		want, ok := out[name]
		if ok {
			if _, hasCPU := want.Requests[corev1.ResourceCPU]; hasCPU {
				continue
			}
		}
		requests, limits, _, err := Original(pod, name)
		if err == nil && requests.Cpu().IsZero() {
			err = fmt.Errorf("boost annotation of container %s records no CPU request", name)
		}
		if err != nil {
			errs = append(errs, err)
			if !ok {
				delete(out, name)
			}
			continue
		}
		want.Requests = withCPU(want.Requests, requests)
		if cpu, ok := limits[corev1.ResourceCPU]; ok && !cpu.IsZero() {
			want.Limits = withCPU(want.Limits, limits)
		}
		out[name] = want
	}
	return out, errs
}

// withCPU returns list (copied) with the cpu of from.
func withCPU(list, from corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(list)+1)
	for name, q := range list {
		out[name] = q
	}
	out[corev1.ResourceCPU] = from[corev1.ResourceCPU].DeepCopy()
	return out
}
