package recommendation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

func list(cpu, mem string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

// plPod is a pod with pod-level requests and limits and containers given as
// name -> requests, limits.
func plPod(level corev1.ResourceRequirements, containers ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{}
	if len(level.Requests)+len(level.Limits) > 0 {
		p.Spec.Resources = &level
	}
	p.Spec.Containers = containers
	return p
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func level(req, lim corev1.ResourceList) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

func TestSharedAtPodLevel(t *testing.T) {
	desired := Desired{
		"app":  {Requests: list("800m", "700Mi"), Limits: list("1600m", ""), LowerBound: list("700m", "600Mi"), UpperBound: list("1", "1Gi")},
		"side": {Requests: list("50m", "64Mi"), LowerBound: list("40m", "60Mi"), UpperBound: list("90m", "80Mi")},
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want Desired
	}{
		{
			name: "no pod-level resources: desired as it is",
			pod:  plPod(corev1.ResourceRequirements{}, ctr("app", list("500m", "512Mi"), list("1", "")), ctr("side", nil, nil)),
			want: desired,
		},
		{
			name: "containers that set nothing of a pod-level resource are not given it",
			pod: plPod(level(list("1", "1Gi"), list("2", "2Gi")),
				ctr("app", list("500m", "512Mi"), list("1", "")), ctr("side", nil, nil)),
			want: Desired{"app": desired["app"]},
		},
		{
			name: "only the resources set at pod level are shared",
			pod: plPod(level(list("1", ""), list("2", "")),
				ctr("app", list("500m", "512Mi"), list("1", "")), ctr("side", nil, nil)),
			want: Desired{"app": desired["app"], "side": {Requests: list("", "64Mi"), LowerBound: list("", "60Mi"), UpperBound: list("", "80Mi")}},
		},
		{
			name: "a container that sets only a limit of a resource keeps getting it",
			pod: plPod(level(list("1", "1Gi"), nil),
				ctr("app", list("500m", "512Mi"), nil), ctr("side", nil, list("100m", "128Mi"))),
			want: desired,
		},
		{
			name: "a sidecar is judged as a container",
			pod: func() *corev1.Pod {
				p := plPod(level(list("1", "1Gi"), nil), ctr("app", list("500m", "512Mi"), nil))
				always := corev1.ContainerRestartPolicyAlways
				p.Spec.InitContainers = []corev1.Container{{Name: "side", RestartPolicy: &always}}
				return p
			}(),
			want: Desired{"app": desired["app"]},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := DesiredValues(desired).String()
			got := SharedAtPodLevel(tt.pod, desired)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, before, DesiredValues(desired).String(), "desired must not be changed")
		})
	}
}

func TestPodLevelFor(t *testing.T) {
	tests := []struct {
		name   string
		before *corev1.Pod
		values resources.Resources
		want   *corev1.ResourceRequirements
	}{
		{
			name:   "no pod-level resources: none",
			before: plPod(corev1.ResourceRequirements{}, ctr("app", list("500m", ""), nil)),
			values: resources.Resources{"app": {Requests: list("800m", "")}},
			want:   nil,
		},
		{
			name: "an increase moves the pod-level request by as much, the limit in proportion",
			before: plPod(level(list("1", "1Gi"), list("2", "2Gi")),
				ctr("app", list("500m", "512Mi"), nil), ctr("side", nil, nil)),
			values: resources.Resources{"app": {Requests: list("800m", "768Mi")}},
			want:   &corev1.ResourceRequirements{Requests: list("1300m", "1280Mi"), Limits: list("2600m", "2560Mi")},
		},
		{
			name: "a decrease moves the pod-level request down by as much, never below the containers' aggregate",
			before: plPod(level(list("1", "1Gi"), list("2", "2Gi")),
				ctr("app", list("500m", "512Mi"), nil), ctr("side", nil, nil)),
			values: resources.Resources{"app": {Requests: list("200m", "256Mi")}},
			want:   &corev1.ResourceRequirements{Requests: list("700m", "768Mi"), Limits: list("1400m", "1536Mi")},
		},
		{
			name: "a pod-level request equal to the containers' aggregate follows it: a resize that only fits with the pod level moved",
			before: plPod(level(list("1", "1Gi"), list("1500m", "")),
				ctr("app", list("600m", "512Mi"), nil), ctr("db", list("400m", "512Mi"), nil)),
			values: resources.Resources{"app": {Requests: list("900m", "")}},
			want:   &corev1.ResourceRequirements{Requests: list("1300m", "1Gi"), Limits: list("1950m", "")},
		},
		{
			name: "unchanged containers: the pod-level values as they were, quantities untouched",
			before: plPod(level(list("1000m", "1Gi"), list("2", "2048Mi")),
				ctr("app", list("500m", "512Mi"), nil)),
			values: resources.Resources{"app": {Requests: list("500m", "512Mi")}},
			want:   &corev1.ResourceRequirements{Requests: list("1000m", "1Gi"), Limits: list("2", "2048Mi")},
		},
		{
			name: "a pod-level limit is raised to a container's limit above it",
			before: plPod(level(list("1", ""), list("1", "")),
				ctr("app", list("500m", ""), list("1", ""))),
			values: resources.Resources{"app": {Requests: list("500m", ""), Limits: list("1500m", "")}},
			want:   &corev1.ResourceRequirements{Requests: list("1", ""), Limits: list("1500m", "")},
		},
		{
			name: "Guaranteed pod-level values stay equal",
			before: plPod(level(list("1", "1Gi"), list("1", "1Gi")),
				ctr("app", list("500m", "512Mi"), list("1", ""))),
			values: resources.Resources{"app": {Requests: list("700m", "512Mi"), Limits: list("1400m", "")}},
			want:   &corev1.ResourceRequirements{Requests: list("1400m", "1Gi"), Limits: list("1400m", "1Gi")},
		},
		{
			name: "a pod-level limit without a request (before the API server defaults it) covers the aggregate and the container limits",
			before: plPod(level(nil, list("1", "")),
				ctr("app", list("500m", ""), nil), ctr("db", list("300m", ""), list("600m", ""))),
			values: resources.Resources{"app": {Requests: list("900m", "")}},
			want:   &corev1.ResourceRequirements{Limits: list("1200m", "")},
		},
		{
			name: "init containers count as the API server counts them: a sidecar adds, an init container is a maximum",
			before: func() *corev1.Pod {
				p := plPod(level(list("2", ""), nil), ctr("app", list("500m", ""), nil))
				always := corev1.ContainerRestartPolicyAlways
				p.Spec.InitContainers = []corev1.Container{
					ctr("init", list("1", ""), nil),
					{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: list("200m", "")}},
				}
				return p
			}(),
			// Before: max(1 (init), 0.5 + 0.2) = 1; after: max(1, 0.5 + 0.6) = 1.1.
			values: resources.Resources{"side": {Requests: list("600m", "")}},
			want:   &corev1.ResourceRequirements{Requests: list("2100m", "")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := Overlay(tt.before, tt.values)
			got := PodLevelFor(tt.before, after)
			if tt.want == nil {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, resources.Resources{"p": *tt.want}.String(), resources.Resources{"p": *got}.String())
			assert.True(t, resources.Equal(resources.Resources{"p": *tt.want}, resources.Resources{"p": *got}))
			// Still what the API server accepts (requests within limits).
			for r, req := range got.Requests {
				if lim, ok := got.Limits[r]; ok {
					assert.LessOrEqual(t, req.Cmp(lim), 0, "%s request above its limit", r)
				}
			}
		})
	}
}

func TestLevelQOS(t *testing.T) {
	tests := []struct {
		name  string
		level *corev1.ResourceRequirements
		want  corev1.PodQOSClass
	}{
		{"nothing set: BestEffort", nil, corev1.PodQOSBestEffort},
		{"requests equal to limits for cpu and memory: Guaranteed", &corev1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("1", "1Gi")}, corev1.PodQOSGuaranteed},
		{"a request below its limit: Burstable", &corev1.ResourceRequirements{Requests: list("500m", "1Gi"), Limits: list("1", "1Gi")}, corev1.PodQOSBurstable},
		{"cpu only, request equal to limit: Burstable (memory unset)", &corev1.ResourceRequirements{Requests: list("1", ""), Limits: list("1", "")}, corev1.PodQOSBurstable},
		{"a limit without a request: Burstable, as the API server compares them", &corev1.ResourceRequirements{Limits: list("1", "1Gi")}, corev1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, LevelQOS(tt.level))
		})
	}
}
