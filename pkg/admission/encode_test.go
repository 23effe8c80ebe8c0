package admission

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// patchJSONs returns the patch of one pod both ways: encoding/json of the
// operations PodPatch returns, and the JSON the handler writes.
func patchJSONs(t *testing.T, shape *podShape, pod *corev1.Pod, desired recommendation.Desired, vpaName string, annotations ...annotation) (want, got []byte) {
	t.Helper()
	values := &patchBuilder{}
	require.NoError(t, values.build(shape, pod, desired, vpaName, annotations))
	written := getPatchBuilder()
	defer putPatchBuilder(written)
	require.NoError(t, written.build(shape, pod, desired, vpaName, annotations))
	got = written.finish()
	if values.ops == nil {
		return nil, got
	}
	want, err := json.Marshal(values.ops)
	require.NoError(t, err)
	return want, got
}

// Every shape of patch: a whole resources object, whole requests or limits
// maps, single values, and the three places of the annotation.
func TestPatchJSONIsEncodingJSONOfTheOperations(t *testing.T) {
	pod := testpod.New("p").Container("app", "100m", "100Mi").Container("sidecar", "10m", "").Obj()
	pod.Spec.Containers[0].Resources.Limits = testpod.List("200m", "200Mi")
	desired := recommendation.Desired{
		"app":     {Requests: testpod.List("300m", "300Mi"), Limits: testpod.List("600m", "600Mi")},
		"sidecar": {Requests: testpod.List("50m", "64Mi")},
	}
	full := []containerShape{{resources: true, requests: true, limits: true}, {resources: true, requests: true}}
	tests := []struct {
		name    string
		shape   podShape
		desired recommendation.Desired
		vpaName string
	}{
		{"values set one by one", podShape{metadata: true, annotations: true, spec: true, containers: full}, desired, "web"},
		{"no annotations", podShape{metadata: true, spec: true, containers: full}, desired, "web"},
		{"no metadata", podShape{spec: true, containers: full}, desired, "web"},
		{"no resources objects", podShape{metadata: true, spec: true, containers: make([]containerShape, 2)}, desired, "web"},
		{"no requests or limits maps", podShape{metadata: true, spec: true,
			containers: []containerShape{{resources: true}, {resources: true}}}, desired, "web"},
		{"names that need escaping", podShape{metadata: true, annotations: true, spec: true, containers: full},
			recommendation.Desired{"app": {Requests: corev1.ResourceList{
				"example.com/a~b": resource.MustParse("1"), `x"<>&\`: resource.MustParse("2"), "é\u2028": resource.MustParse("3"), "\x01\xff": resource.MustParse("4")}}},
			"web<&>\"é\xff"},
		{"nothing changes", podShape{metadata: true, spec: true, containers: full},
			recommendation.Desired{"app": {Requests: testpod.List("100m", "100Mi")}}, "web"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, got := patchJSONs(t, &tc.shape, pod, tc.desired, tc.vpaName)
			assert.Equal(t, string(want), string(got))
		})
	}
	// The same, with the startup boosts' annotations beside the note, or
	// alone when no resource changes.
	boosts := []annotation{
		{key: boost.AnnotationKey("app"), value: `{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}`},
		{key: boost.AnnotationKey("side/car~1"), value: "\u2028<&>\"é\xff"},
	}
	for _, tc := range tests {
		t.Run(tc.name+", boosted", func(t *testing.T) {
			want, got := patchJSONs(t, &tc.shape, pod, tc.desired, tc.vpaName, boosts...)
			require.NotEmpty(t, want)
			assert.Equal(t, string(want), string(got))
			assert.Contains(t, string(got), "vpaCpuStartupBoost")
		})
	}
}

// Container indexes past one digit, and many names.
func TestPatchJSONOfManyContainers(t *testing.T) {
	b := testpod.New("p")
	desired := recommendation.Desired{}
	var shape podShape
	shape.metadata, shape.spec = true, true
	for i := range 12 {
		name := fmt.Sprintf("c%d", i)
		b = b.Container(name, "100m", "100Mi")
		desired[name] = recommendation.Container{Requests: corev1.ResourceList{
			"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi"), "a": resource.MustParse("1"),
			"b": resource.MustParse("2"), "c": resource.MustParse("3"), "d": resource.MustParse("4")}}
		shape.containers = append(shape.containers, containerShape{resources: i%2 == 0, requests: i%3 == 0})
	}
	want, got := patchJSONs(t, &shape, b.Obj(), desired, "web")
	assert.Equal(t, string(want), string(got))
}

// FuzzPatchJSON: names, quantities and VPA names of any bytes; with
// layout&32, a startup boost's annotation of the container too (its value
// any bytes); with layout&64 the container is a sidecar, in
// spec.initContainers, and with layout&128 an init container that is not
// a sidecar comes first there.
func FuzzPatchJSON(f *testing.F) {
	f.Add("app", "cpu", "250m", "web", uint8(7))
	f.Add("a/b~c", `x"<>&\`, "1.5Gi", "é\u2028\xff", uint8(0))
	f.Add("", "", "+5", "", uint8(3))
	f.Add("c", "m", "1e3", "v", uint8(5))
	f.Add("app", "cpu", "100m", `{"requests":{"cpu":"1"}}`, uint8(32|7))
	f.Add("a/b~c", "cpu", "250m", "é\u2028\xff", uint8(32))
	f.Add("app", "cpu", "100m", "v", uint8(32|2|1))
	f.Add("proxy", "memory", "64Mi", "web", uint8(128|64|8|4|1))
	f.Add("a/b~c", `x"<>&\`, "1.5Gi", "é\u2028\xff", uint8(64))
	f.Add("setup", "cpu", "1", "web", uint8(128|64|16|4))
	f.Fuzz(func(t *testing.T, container, name, value, vpaName string, layout uint8) {
		// Quantities reach a patch only after the bounds every quantity
		// read from a user passes (an exponent of 10^18 digits would
		// take the encoders forever, and the product never parses it).
		q, err := quantity.Parse(value)
		if err != nil {
			return
		}
		b := testpod.New("p")
		shape := podShape{metadata: layout&1 != 0, annotations: layout&2 != 0, spec: true}
		if layout&128 != 0 {
			b.InitContainer("setup", "1", "")
			shape.initContainers = append(shape.initContainers, containerShape{resources: true, requests: true})
		}
		s := containerShape{resources: layout&4 != 0, requests: layout&8 != 0, limits: layout&16 != 0}
		if layout&64 != 0 {
			b.Sidecar(container, "100m", "")
			shape.initContainers = append(shape.initContainers, s)
		} else {
			b.Container(container, "100m", "")
			shape.containers = append(shape.containers, s)
		}
		pod := b.Obj()
		desired := recommendation.Desired{container: {
			Requests: corev1.ResourceList{corev1.ResourceName(name): q},
			Limits:   corev1.ResourceList{corev1.ResourceName(name): q, "cpu": resource.MustParse("1")}}}
		var boosts []annotation
		if layout&32 != 0 {
			boosts = []annotation{{key: boost.AnnotationKey(container), value: vpaName}}
		}
		want, got := patchJSONs(t, &shape, pod, desired, vpaName, boosts...)
		if string(want) != string(got) {
			t.Fatalf("written %s, encoding/json %s", got, want)
		}
	})
}

// The answers the handler writes itself, and those it leaves to
// encoding/json.
func TestAppendReviewIsEncodingJSON(t *testing.T) {
	jsonPatch := admissionv1.PatchTypeJSONPatch
	odd := admissionv1.PatchType(`J<&>"é`)
	tests := []*admissionv1.AdmissionResponse{
		{UID: reviewUID, Allowed: true},
		{UID: reviewUID, Allowed: false},
		{UID: "", Allowed: true},
		{UID: `u"<>&\` + "\u2028é\xff\x01", Allowed: true},
		{UID: reviewUID, Allowed: true, Patch: []byte(`[{"op":"add","path":"/a","value":"b"}]`), PatchType: &jsonPatch},
		{UID: reviewUID, Allowed: true, Patch: []byte{0, 1, 2, 0xff}, PatchType: &odd},
		{UID: reviewUID, Allowed: true, Patch: []byte{}},
		{UID: reviewUID, Allowed: true, Warnings: []string{"w"}},
		{UID: reviewUID, Allowed: false, Result: &metav1.Status{Code: 422, Message: "no"}},
		{UID: reviewUID, Allowed: true, AuditAnnotations: map[string]string{"a": "b"}},
	}
	for i, resp := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			want, err := json.Marshal(reviewOf(resp))
			require.NoError(t, err)
			got, err := appendReview(nil, resp)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
		})
	}
}

func FuzzAppendReview(f *testing.F) {
	f.Add(reviewUID, true, []byte(`[{"op":"add"}]`), "JSONPatch", true)
	f.Add("\u2028<\xff", false, []byte{}, "", false)
	f.Fuzz(func(t *testing.T, uid string, allowed bool, patch []byte, patchType string, withType bool) {
		resp := &admissionv1.AdmissionResponse{UID: types.UID(uid), Allowed: allowed, Patch: patch}
		if withType {
			resp.PatchType = ptr.To(admissionv1.PatchType(patchType))
		}
		want, err := json.Marshal(reviewOf(resp))
		require.NoError(t, err)
		got, err := appendReview([]byte("prefix"), resp)
		require.NoError(t, err)
		if string(got) != "prefix"+string(want) {
			t.Fatalf("written %s, encoding/json %s", got, want)
		}
	})
}
