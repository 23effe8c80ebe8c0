package admission

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
)

// Reasons of the events the admission controller records on a VPA.
const (
	// ReasonStartupBoostApplied: a container of a new pod of the VPA gets
	// boosted CPU (Normal).
	ReasonStartupBoostApplied = "InPlaceStartupBoostApplied"
	// ReasonStartupBoostSkipped: a container of a new pod of the VPA has a
	// startup boost policy but is not boosted (Warning).
	ReasonStartupBoostSkipped = "InPlaceStartupBoostSkipped"
	// ReasonStartupBoostCapped: a container of a new pod of the VPA gets
	// less boosted CPU than its policy asks, so that the pod stays within
	// the namespace's LimitRanges and ResourceQuotas (Warning).
	ReasonStartupBoostCapped = "InPlaceStartupBoostCapped"
)

// containerBoost is the startup boost of one container of a new pod: a
// boost from one CPU request to another, or why there is none.
type containerBoost struct {
	container string
	from, to  resource.Quantity
	skipped   string
	// capped says why to is less than wanted, what the policy asks.
	capped string
	wanted resource.Quantity
}

// hasStartupBoost tells whether vpa has any CPU startup boost policy.
func hasStartupBoost(vpa *vpatypes.VerticalPodAutoscaler) bool {
	if b := vpa.Spec.StartupBoost; b != nil && b.CPU != nil {
		return true
	}
	if vpa.Spec.ResourcePolicy == nil {
		return false
	}
	for _, p := range vpa.Spec.ResourcePolicy.ContainerPolicies {
		if p.StartupBoost != nil && p.StartupBoost.CPU != nil {
			return true
		}
	}
	return false
}

// boosting tells whether new pods of vpa, an InPlace VPA, may be boosted:
// both feature gates are on and it has a boost policy.
func (h *Handler) boosting(vpa *vpatypes.VerticalPodAutoscaler) bool {
	return hasStartupBoost(vpa) && h.cfg.FeatureGate.Enabled(features.InPlace) &&
		h.cfg.FeatureGate.Enabled(features.CPUStartupBoost)
}

// startupBoosts works out the startup boost of each container of pod: it
// returns desired with the boosted CPU of the boosted containers (desired
// itself is not changed: it may be shared), the annotations that record
// them (upstream's, sorted by key), and one entry per container with a
// boost policy.
//
// Each boost is kept within adm, what the namespace's admission allows the
// pod (nil: nothing), the boosts of the containers before it counted: a
// boost never makes a pod that the API server refuses.
//
// A container that already carries a boost annotation is not boosted and
// its annotation is left as it is: the pod was written by someone else
// (a user, or upstream's admission controller), and what the annotation
// says of the container's resources cannot be checked here. Neither is a
// container whose name is not unique in the pod (the API server refuses
// such pods), nor any container when the pod's annotations cannot be read.
func startupBoosts(shape *podShape, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, desired recommendation.Desired,
	adm *boost.Admission) (recommendation.Desired, []annotation, []containerBoost) {
	var existing map[string]string
	var unreadable string
	switch a := shape.annotationsJSON; {
	case len(a) > maxPodAnnotationsBytes:
		unreadable = fmt.Sprintf("the pod's annotations are larger than %d bytes", maxPodAnnotationsBytes)
	case a.present():
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(a, &existing); err != nil {
			unreadable = "the pod's annotations cannot be read"
		}
	}

	var room *boost.Room
	if adm != nil {
		room = boost.NewRoom(*adm, unboosted(pod, desired))
	}
	var out recommendation.Desired
	var annotations []annotation
	var boosts []containerBoost
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if boost.For(vpa, c.Name) == nil {
			continue
		}
		skip := func(reason string) { boosts = append(boosts, containerBoost{container: c.Name, skipped: reason}) }
		switch {
		case unreadable != "":
			skip(unreadable)
			continue
		case countName(pod.Spec.Containers, c.Name) > 1:
			skip("its name is not unique in the pod")
			continue
		}
		if _, ok := existing[boost.AnnotationKey(c.Name)]; ok {
			skip("the new pod already has the annotation " + boost.AnnotationKey(c.Name) + ", left as it is")
			continue
		}
		in := boost.Input{VPA: vpa, Container: c, Room: room}
		want, recommended := desired[c.Name]
		if recommended {
			// What the container gets without the boost: its own values,
			// with the recommendation's over them.
			in.Requests, in.Limits = overlay(c.Resources.Requests, want.Requests), overlay(c.Resources.Limits, want.Limits)
		}
		outcome := boost.Apply(in)
		if !outcome.Boosted {
			skip(outcome.NotBoosted)
			continue
		}
		room.Take(outcome)
		requests, limits := in.Requests, in.Limits
		if !recommended {
			requests, limits = overlay(c.Resources.Requests, nil), overlay(c.Resources.Limits, nil)
		}
		if requests == nil {
			requests = corev1.ResourceList{}
		}
		if limits == nil {
			limits = corev1.ResourceList{}
		}
		from := requests[corev1.ResourceCPU]
		if _, ok := requests[corev1.ResourceCPU]; !ok {
			from = limits[corev1.ResourceCPU]
		}
		requests[corev1.ResourceCPU] = outcome.Requests[corev1.ResourceCPU]
		if q, ok := outcome.Limits[corev1.ResourceCPU]; ok {
			limits[corev1.ResourceCPU] = q
		}
		if out == nil {
			out = make(recommendation.Desired, len(desired)+1)
			for name, d := range desired {
				out[name] = d
			}
		}
		out[c.Name] = recommendation.Container{Requests: requests, Limits: limits}
		annotations = append(annotations, annotation{key: boost.AnnotationKey(c.Name), value: outcome.Annotation})
		boosts = append(boosts, containerBoost{container: c.Name, from: from, to: outcome.Requests[corev1.ResourceCPU],
			capped: outcome.Capped, wanted: outcome.Wanted})
	}
	if out == nil {
		out = desired
	}
	slices.SortFunc(annotations, func(a, b annotation) int { return strings.Compare(a.key, b.key) })
	return out, annotations, boosts
}

// unboosted returns pod as the webhook gives it without boosts: each
// container's and sidecar's resources with its recommendation over them.
// Only the containers are copied.
func unboosted(pod *corev1.Pod, desired recommendation.Desired) *corev1.Pod {
	out := *pod
	out.Spec.Containers = slices.Clone(pod.Spec.Containers)
	out.Spec.InitContainers = slices.Clone(pod.Spec.InitContainers)
	for ref := range recommendation.Containers(&out) {
		c := ref.Container
		if want, ok := desired[c.Name]; ok {
			c.Resources.Requests = overlay(c.Resources.Requests, want.Requests)
			c.Resources.Limits = overlay(c.Resources.Limits, want.Limits)
		}
	}
	return &out
}

func countName(containers []corev1.Container, name string) int {
	n := 0
	for i := range containers {
		if containers[i].Name == name {
			n++
		}
	}
	return n
}

// overlay returns a copy of base with the values of over set; nil when
// both are empty.
func overlay(base, over corev1.ResourceList) corev1.ResourceList {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(corev1.ResourceList, len(base)+len(over))
	for name, q := range base {
		out[name] = q.DeepCopy()
	}
	for name, q := range over {
		out[name] = q.DeepCopy()
	}
	return out
}

// podOwner names what created pod, for events: its controller, else its
// generateName, else its name.
func podOwner(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return ref.Kind + " " + ref.Name
	}
	return cmp.Or(pod.GenerateName, pod.Name)
}
