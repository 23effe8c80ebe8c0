package resize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// plPod is a running pod with pod-level requests cpu 1, memory 1Gi and
// limits cpu 2, memory 2Gi, and two containers: app (requests 500m, 512Mi,
// no limits) and side, which sets nothing and shares the pod's resources.
// Its status reports the pod-level values (statusShown) as a kubelet with
// InPlacePodLevelResourcesVerticalScaling does.
func plPod(statusShown bool) *testpod.Builder {
	b := testpod.New("p").Container("app", "500m", "512Mi").Container("side", "", "").
		PodLevel("1", "1Gi", "2", "2Gi").Running()
	if statusShown {
		b.PodLevelStatus()
	}
	return b
}

var declares = []string{"InPlacePodVerticalScalingInitContainers", FeaturePodLevelResize}
var lacks = []string{"InPlacePodVerticalScalingInitContainers"}

// The per-version rules for pods with pod-level resources (KEP-2837,
// KEP-5419), one row per case; the API server's answers they stand for were
// read in ValidatePodResize of Kubernetes 1.33 to 1.38 and seen on the
// local 1.37 cluster.
func TestDecidePodLevel(t *testing.T) {
	tests := []struct {
		name         string
		pod          *corev1.Pod
		desired      recommendation.Desired
		record       *records.Record
		minor        int
		nodeKnown    bool
		nodeFeatures []string
		noDisrupt    bool
		action       Action
		reason       Reason
		patch        string
		disruptive   bool
		messageHint  string
	}{
		{
			name:    "1.33: a pod with pod-level resources is not resized at all: invalid, nothing sent",
			pod:     plPod(false).Obj(),
			desired: want("app", "800m", "768Mi"), minor: 33, nodeKnown: true,
			action: ActionSkip, reason: ReasonInvalid, messageHint: "cannot be resized in place on Kubernetes 1.33",
		},
		{
			name:    "1.34: a pod with pod-level resources is not resized at all: invalid, nothing sent",
			pod:     plPod(false).Obj(),
			desired: want("app", "800m", "768Mi"), minor: 34, nodeKnown: true, nodeFeatures: declares,
			action: ActionSkip, reason: ReasonInvalid, messageHint: "cannot be resized in place on Kubernetes 1.34",
		},
		{
			name:    "1.35 with the status showing no pod-level resources (the alpha gate off): invalid, nothing sent",
			pod:     plPod(false).Obj(),
			desired: want("app", "800m", "768Mi"), minor: 35, nodeKnown: true,
			action: ActionSkip, reason: ReasonInvalid, messageHint: "only with the alpha gate InPlacePodLevelResourcesVerticalScaling",
		},
		{
			name:    "1.35 with the status showing them (the gate on), the node declaring no features: containers and pod level resized together",
			pod:     plPod(true).Obj(),
			desired: want("app", "800m", "768Mi"), minor: 35, nodeKnown: true,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"800m","memory":"768Mi"}}}],
				"resources":{"requests":{"cpu":"1300m","memory":"1280Mi"},"limits":{"cpu":"2600m","memory":"2560Mi"}}}}`,
		},
		{
			name:    "1.35 with the gate on, the node declaring features but not the pod-level resize: containers kept within the pod level",
			pod:     plPod(true).Obj(),
			desired: want("app", "1200m", "768Mi"), minor: 35, nodeKnown: true, nodeFeatures: lacks,
			action: ActionPatch, reason: ReasonPodLevelCapped, messageHint: "does not declare the feature",
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1","memory":"768Mi"}}}]}}`,
		},
		{
			name:    "1.36, the node declaring the feature: an increase moves the pod-level requests by as much, the limits in proportion",
			pod:     plPod(true).Obj(),
			desired: want("app", "800m", "768Mi"), minor: 36, nodeKnown: true, nodeFeatures: declares,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"800m","memory":"768Mi"}}}],
				"resources":{"requests":{"cpu":"1300m","memory":"1280Mi"},"limits":{"cpu":"2600m","memory":"2560Mi"}}}}`,
		},
		{
			name:    "1.36, the node declaring the feature: a decrease moves them down by as much",
			pod:     plPod(true).Obj(),
			desired: want("app", "200m", "256Mi"), minor: 36, nodeKnown: true, nodeFeatures: declares,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"200m","memory":"256Mi"}}}],
				"resources":{"requests":{"cpu":"700m","memory":"768Mi"},"limits":{"cpu":"1400m","memory":"1536Mi"}}}}`,
		},
		{
			name: "1.37, the node declaring the feature: a resize that only fits with the pod level moved moves it",
			pod: testpod.New("p").Container("app", "600m", "512Mi").Container("db", "400m", "512Mi").
				PodLevel("1", "1Gi", "", "").Running().PodLevelStatus().Obj(),
			desired: want("app", "900m", "512Mi"), minor: 37, nodeKnown: true, nodeFeatures: declares,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"900m","memory":"512Mi"}}}],
				"resources":{"requests":{"cpu":"1300m","memory":"1Gi"}}}}`,
		},
		{
			name: "1.37, the node declaring the feature: Guaranteed pod-level values move with their requests and limits equal",
			pod: testpod.New("p").Container("app", "500m", "512Mi").Limits("app", "1", "1Gi").
				PodLevel("1", "1Gi", "1", "1Gi").Running().PodLevelStatus().Obj(),
			desired: wantWithLimits("app", "700m", "768Mi"), minor: 37, nodeKnown: true, nodeFeatures: declares,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"700m","memory":"768Mi"},"limits":{"cpu":"700m","memory":"768Mi"}}}],
				"resources":{"requests":{"cpu":"1200m","memory":"1280Mi"},"limits":{"cpu":"1200m","memory":"1280Mi"}}}}`,
		},
		{
			name:    "1.37, the node declaring the feature: containers at the recommendation, pod level where it follows them: up to date",
			pod:     plPod(true).Obj(),
			desired: want("app", "500m", "512Mi"), minor: 37, nodeKnown: true, nodeFeatures: declares,
			action: ActionSkip, reason: ReasonUpToDate,
		},
		{
			name:    "1.36, the node lacking the feature: an increase within the pod-level requests is sent as it is",
			pod:     plPod(true).Obj(),
			desired: want("app", "900m", "768Mi"), minor: 36, nodeKnown: true, nodeFeatures: lacks,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"900m","memory":"768Mi"}}}]}}`,
		},
		{
			name: "1.37, the node lacking the feature: an increase past the pod-level request is cut to fit, what is left out said",
			pod: testpod.New("p").Container("app", "600m", "512Mi").Container("db", "400m", "512Mi").
				PodLevel("1", "1Gi", "", "").Running().PodLevelStatus().Obj(),
			desired: want("app", "900m", "512Mi"), minor: 37, nodeKnown: true, nodeFeatures: lacks,
			action: ActionSkip, reason: ReasonPodLevelBound, messageHint: "app: requests cpu=900m",
		},
		{
			name: "1.37, the node lacking the feature: two increases share the room the pod-level request leaves",
			pod: testpod.New("p").Container("app", "300m", "").Container("db", "300m", "").
				PodLevel("1", "", "", "").Running().PodLevelStatus().Obj(),
			desired: recommendation.Desired{
				"app": {Requests: testpod.List("700m", ""), LowerBound: testpod.List("700m", ""), UpperBound: testpod.List("700m", "")},
				"db":  {Requests: testpod.List("500m", ""), LowerBound: testpod.List("500m", ""), UpperBound: testpod.List("500m", "")},
			},
			minor: 37, nodeKnown: true, nodeFeatures: lacks,
			action: ActionPatch, reason: ReasonPodLevelCapped,
			// Increases of 400m and 200m, 400m of room: two thirds of each, rounded
			// down, at the largest share that fits.
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"567m"}}},{"name":"db","resources":{"requests":{"cpu":"433m"}}}]}}`,
		},
		{
			name:    "1.37, the node lacking the feature: a container limit is kept at the pod-level limit",
			pod:     testpod.New("p").Container("app", "500m", "").Limits("app", "1", "").PodLevel("1", "", "2", "").Running().PodLevelStatus().Obj(),
			desired: recommendation.Desired{"app": {Requests: testpod.List("800m", ""), Limits: testpod.List("3", ""), LowerBound: testpod.List("800m", ""), UpperBound: testpod.List("800m", "")}},
			minor:   37, nodeKnown: true, nodeFeatures: lacks,
			action: ActionPatch, reason: ReasonPodLevelCapped,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"800m"},"limits":{"cpu":"2"}}}]}}`,
		},
		{
			name:    "version unknown, node not in the cache, the status showing pod-level resources: the pod level moves",
			pod:     plPod(true).Obj(),
			desired: want("app", "800m", "768Mi"),
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"800m","memory":"768Mi"}}}],
				"resources":{"requests":{"cpu":"1300m","memory":"1280Mi"},"limits":{"cpu":"2600m","memory":"2560Mi"}}}}`,
		},
		{
			name:    "version unknown, node not in the cache, the status showing nothing: containers kept within the pod level",
			pod:     plPod(false).Obj(),
			desired: want("app", "1200m", "768Mi"),
			action:  ActionPatch, reason: ReasonPodLevelCapped, messageHint: "status shows no pod-level resources",
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1","memory":"768Mi"}}}]}}`,
		},
		{
			name:    "1.37: a refusal for want of the feature, recorded, keeps the pod level where it is: containers resized within it",
			pod:     plPod(true).Obj(),
			desired: want("app", "1200m", "768Mi"), minor: 37, nodeKnown: true, nodeFeatures: declares,
			record: &records.Record{Kind: records.KindInvalid, Message: `pods "p" is forbidden: pod update requires features InPlacePodLevelResourcesVerticalScaling which are not available on node "n"`,
				Attempted: resources.Resources{"app": {Requests: testpod.List("1200m", "768Mi")}, resources.PodLevel: {Requests: testpod.List("1700m", "1280Mi"), Limits: testpod.List("3400m", "2560Mi")}}},
			action: ActionPatch, reason: ReasonPodLevelCapped, messageHint: "refused before",
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1","memory":"768Mi"}}}]}}`,
		},
		{
			name:    "1.37: the same pod-level change refused before is not sent again",
			pod:     plPod(true).Obj(),
			desired: want("app", "1200m", "768Mi"), minor: 37, nodeKnown: true, nodeFeatures: declares,
			record: &records.Record{Kind: records.KindNodeCapacity, Message: "node didn't have enough allocatable resources: cpu",
				Attempted: resources.Resources{"app": {Requests: testpod.List("1200m", "768Mi")}, resources.PodLevel: {Requests: testpod.List("1700m", "1280Mi"), Limits: testpod.List("3400m", "2560Mi")}}},
			action: ActionSkip, reason: ReasonRecordedSame,
		},
		{
			name: "1.37: a sidecar without a limit restarting on cpu restarts when the pod-level cpu limit moves: disruptive, paced",
			pod: testpod.New("p").Container("app", "500m", "512Mi").Container("side", "", "").
				ResizePolicy("side", corev1.ResourceCPU, corev1.RestartContainer).
				PodLevel("1", "1Gi", "2", "2Gi").Running().PodLevelStatus().Obj(),
			desired: want("app", "800m", "512Mi"), minor: 37, nodeKnown: true, nodeFeatures: declares, noDisrupt: true,
			action: ActionWait, reason: ReasonDisruptionBudget, disruptive: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{
				Pod: tc.pod, Desired: tc.desired, Record: tc.record,
				Threshold: 0.1, ServerMinor: tc.minor, DisruptionAllowed: !tc.noDisrupt,
				NodeKnown: tc.nodeKnown, NodeFeatures: tc.nodeFeatures,
			})
			assert.Equal(t, tc.action, d.Action, d.Message)
			assert.Equal(t, tc.reason, d.Reason, d.Message)
			assert.Equal(t, tc.disruptive, d.Disruptive, "Disruptive")
			if tc.patch != "" {
				assert.JSONEq(t, tc.patch, string(d.Patch))
			} else {
				assert.Empty(t, d.Patch)
			}
			if tc.messageHint != "" {
				assert.Contains(t, d.Message, tc.messageHint)
			}
			if d.Action == ActionPatch {
				assert.Empty(t, Validate(tc.pod, d.Target, tc.minor), "what is sent passes the API server's pod-level rules")
			}
		})
	}
}

// The pod-level memory limit is lowered only as safely as a container's
// (memory.go): above the pod's memory in use plus the margin, never to or
// below a value the kubelet refused.
func TestDecidePodLevelMemoryLimit(t *testing.T) {
	// Pod-level memory 1Gi / 2Gi; app 512Mi; lowering app to 256Mi moves the
	// pod-level request to 768Mi and its limit to 1536Mi.
	pod := func() *testpod.Builder {
		return testpod.New("p").Container("app", "500m", "512Mi").PodLevel("1", "1Gi", "2", "2Gi").Running().PodLevelStatus()
	}
	mi := func(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }
	tests := []struct {
		name        string
		pod         *corev1.Pod
		usage       map[string]resource.Quantity
		memRecord   *records.Record
		reason      Reason
		patch       string
		newMemLimit string // the pod-level limit a new memory record holds
	}{
		{
			name:   "usage unknown: lowered, the kubelet's check is the last line",
			pod:    pod().Obj(),
			reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m","memory":"256Mi"}}}],
				"resources":{"requests":{"cpu":"1","memory":"768Mi"},"limits":{"cpu":"2","memory":"1536Mi"}}}}`,
		},
		{
			name:   "usage well below: lowered",
			pod:    pod().Obj(),
			usage:  map[string]resource.Quantity{"app": mi(400)},
			reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m","memory":"256Mi"}}}],
				"resources":{"requests":{"cpu":"1","memory":"768Mi"},"limits":{"cpu":"2","memory":"1536Mi"}}}}`,
		},
		{
			name:   "usage plus the margin above the new pod-level limit: the limit kept, the rest resized",
			pod:    pod().Obj(),
			usage:  map[string]resource.Quantity{"app": mi(1500)},
			reason: ReasonMemoryLimitKept,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m","memory":"256Mi"}}}],
				"resources":{"requests":{"cpu":"1","memory":"768Mi"},"limits":{"cpu":"2","memory":"2Gi"}}}}`,
			newMemLimit: "1536Mi",
		},
		{
			name: "the kubelet refused to lower the pod-level limit: sent again with it kept, the refusal recorded",
			pod: func() *corev1.Pod {
				p := pod().Obj()
				p.Spec.Containers[0].Resources.Requests = testpod.List("500m", "256Mi")
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: testpod.List("1", "768Mi"), Limits: testpod.List("2", "1536Mi")}
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue,
					Reason: corev1.PodReasonError, Message: "cannot decrease memory limits: attempting to set pod memory limit (1610612736) below current usage (1887436800)"})
				return p
			}(),
			reason: ReasonMemoryLimitRefused,
			patch: `{"spec":{"containers":[],
				"resources":{"requests":{"cpu":"1","memory":"768Mi"},"limits":{"cpu":"2","memory":"2Gi"}}}}`,
			newMemLimit: "1536Mi",
		},
		{
			name:      "a memory record holds the pod-level limit: kept",
			pod:       pod().Obj(),
			memRecord: &records.Record{Kind: records.KindMemoryLimitRefused, Attempted: resources.Resources{resources.PodLevel: {Limits: testpod.List("", "1536Mi")}}},
			reason:    ReasonMemoryLimitKept,
			patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m","memory":"256Mi"}}}],
				"resources":{"requests":{"cpu":"1","memory":"768Mi"},"limits":{"cpu":"2","memory":"2Gi"}}}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{
				Pod: tc.pod, Desired: want("app", "500m", "256Mi"), Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true,
				NodeKnown: true, NodeFeatures: declares, MemoryUsage: tc.usage, MemoryLimitMargin: 0.1, MemoryRecord: tc.memRecord,
			})
			require.Equal(t, ActionPatch, d.Action, d.Message)
			assert.Equal(t, tc.reason, d.Reason, d.Message)
			assert.JSONEq(t, tc.patch, string(d.Patch))
			if tc.newMemLimit != "" {
				require.NotNil(t, d.NewMemoryRecord, d.Message)
				q, ok := d.NewMemoryRecord.ContainerMemoryLimit(resources.PodLevel)
				require.True(t, ok, "the record holds the pod level: %s", d.NewMemoryRecord.Attempted)
				assert.Equal(t, tc.newMemLimit, q.String())
				assert.Contains(t, d.Message, "pod level: memory limit kept at 2Gi")
			}
		})
	}
	// The memory in use is fetched when the pod-level limit would be lowered.
	assert.True(t, NeedsMemoryUsage(pod().Obj(), want("app", "500m", "256Mi"), 37), "the pod-level limit would be lowered")
	assert.False(t, NeedsMemoryUsage(pod().Obj(), want("app", "500m", "768Mi"), 37), "nothing is lowered")
}

// The API server's pod-level rules, as Validate checks them before a patch.
func TestValidatePodLevel(t *testing.T) {
	pod := testpod.New("p").Container("app", "500m", "512Mi").Limits("app", "1", "").
		PodLevel("1", "1Gi", "2", "2Gi").Running().PodLevelStatus().Obj()
	level := func(reqCPU, reqMem, limCPU, limMem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: testpod.List(reqCPU, reqMem), Limits: testpod.List(limCPU, limMem)}
	}
	tests := []struct {
		name   string
		target resources.Resources
		want   string
	}{
		{"containers within the pod level as it is: valid",
			resources.Resources{"app": {Requests: testpod.List("900m", "1Gi"), Limits: testpod.List("2", "")}}, ""},
		{"the containers' aggregate request over the pod-level request: invalid",
			resources.Resources{"app": {Requests: testpod.List("1100m", "512Mi"), Limits: testpod.List("2", "")}}, "aggregate cpu request 1100m would exceed the pod-level request 1"},
		{"a container limit over the pod-level limit: invalid",
			resources.Resources{"app": {Requests: testpod.List("500m", "512Mi"), Limits: testpod.List("3", "")}}, "container app: cpu limit 3 would exceed the pod-level limit 2"},
		{"pod-level values moved with the containers: valid",
			resources.Resources{"app": {Requests: testpod.List("1500m", "512Mi"), Limits: testpod.List("3", "")}, resources.PodLevel: level("1500m", "1Gi", "3", "2Gi")}, ""},
		{"a pod-level request over its limit: invalid",
			resources.Resources{"app": {Requests: testpod.List("500m", "512Mi"), Limits: testpod.List("1", "")}, resources.PodLevel: level("3", "1Gi", "2", "2Gi")}, "pod-level cpu request 3 would exceed the pod-level limit 2"},
		{"a pod-level limit removed: invalid",
			resources.Resources{"app": {Requests: testpod.List("500m", "512Mi"), Limits: testpod.List("1", "")}, resources.PodLevel: level("1", "1Gi", "2", "")}, "pod-level memory limit cannot be removed"},
		{"the QoS class the pod-level values decide changed: invalid",
			resources.Resources{"app": {Requests: testpod.List("500m", "512Mi"), Limits: testpod.List("1", "")}, resources.PodLevel: level("2", "2Gi", "2", "2Gi")}, "QoS class would change from Burstable to Guaranteed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Validate(pod, tt.target, 37)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
		})
	}
}

// A pod's pod-level values count on its node as the scheduler counts them:
// they replace the containers' sum, at the larger of the spec and what the
// status shows while a resize of theirs is under way; a resize of ours that
// moves them takes what it moves them to.
func TestFitsNodePodLevel(t *testing.T) {
	node := &corev1.Node{}
	node.Name = "n"
	node.Status.Allocatable = testpod.List("4", "8Gi")
	onNode := func(b *testpod.Builder) *corev1.Pod {
		p := b.Obj()
		p.Spec.NodeName = "n"
		return p
	}
	other := onNode(testpod.New("o").UID("o").Container("c", "100m", "100Mi").PodLevel("2", "1Gi", "", "").Running().PodLevelStatus())
	// A pod-level resize of the other pod down to 1 CPU is under way: it still
	// holds 2 (what its status shows).
	other.Spec.Resources.Requests = testpod.List("1", "1Gi")
	pod := onNode(plPod(true).UID("p"))

	fits, why := FitsNode(node, []*corev1.Pod{other}, nil, pod, resources.Resources{"app": {Requests: testpod.List("800m", "512Mi")},
		resources.PodLevel: {Requests: testpod.List("2", "1Gi"), Limits: testpod.List("4", "2Gi")}})
	assert.True(t, fits, why)
	fits, why = FitsNode(node, []*corev1.Pod{other}, nil, pod, resources.Resources{"app": {Requests: testpod.List("800m", "512Mi")},
		resources.PodLevel: {Requests: testpod.List("2100m", "1Gi"), Limits: testpod.List("4", "2Gi")}})
	assert.False(t, fits, "2 held by the other pod's status, 2.1 asked: more than 4")
	assert.Contains(t, why, "the pod would request 2100m")
	assert.Equal(t, "2100m", func() string {
		q := ResizedRequests(pod, resources.Resources{resources.PodLevel: {Requests: testpod.List("2100m", "")}})[corev1.ResourceCPU]
		return q.String()
	}())
}

func TestPendingRestartPodLevel(t *testing.T) {
	base := func() *corev1.Pod {
		return testpod.New("p").Container("app", "500m", "512Mi").ResizePolicy("app", corev1.ResourceMemory, corev1.RestartContainer).
			PodLevel("1", "1Gi", "2", "2Gi").Running().PodLevelStatus().Obj()
	}
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"settled", func(*corev1.Pod) {}, false},
		{"a pod-level memory limit the container inherits, not taken up yet: it will restart", func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Resources.Limits = testpod.List("2", "3Gi")
		}, true},
		{"a pod-level cpu limit: the container does not restart on cpu", func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Resources.Limits = testpod.List("3", "2Gi")
		}, false},
		{"a container with a memory limit of its own does not inherit the pod's", func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Containers[0].Resources.Limits = testpod.List("", "1Gi")
			p.Status.ContainerStatuses[0].Resources.Limits = testpod.List("", "1Gi")
			p.Spec.Resources.Limits = testpod.List("2", "3Gi")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.change(p)
			assert.Equal(t, tt.want, PendingRestart(p))
		})
	}
}
