package admission

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// benchPod is a pod as the ReplicaSet controller creates it, with the
// fields the webhook skips.
const benchPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-7d9f8-","namespace":"default",` +
	`"labels":{"app":"web","pod-template-hash":"7d9f8"},"annotations":{"team":"web"},` +
	`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}]},` +
	`"spec":{"volumes":[{"name":"config","configMap":{"name":"app-config"}}],` +
	`"initContainers":[{"name":"init","image":"busybox","restartPolicy":"Always","resources":{"requests":{"cpu":"10m"}}}],` +
	`"containers":[{"name":"app","image":"registry.example/app:1","env":[{"name":"A","value":"b \"quoted\" \u00e9"}],` +
	`"resources":{"limits":{"cpu":"200m","memory":"200Mi"},"requests":{"cpu":"100m","memory":"100Mi"}},` +
	`"resizePolicy":[{"resourceName":"cpu","restartPolicy":"NotRequired"},{"resourceName":"memory","restartPolicy":"RestartContainer"}]},` +
	`{"name":"sidecar","resources":{}},{"name":"bare"}],` +
	`"tolerations":[{"key":"k","operator":"Exists","tolerationSeconds":300}],"priority":0},"status":{}}`

// Inputs whose meaning the fast decoders must either get right or leave
// to the reference path. wantFast marks those they must take: the plain
// reviews the API server sends.
var fastPathCases = []struct {
	name     string
	body     string
	wantFast bool
}{
	{"pod review", podReview("CREATE", podJSON("", appContainer)), true},
	{"pod review with the fields the webhook skips", podReview("CREATE", benchPod), true},
	{"VPA review", vpaReview("UPDATE", withMode("InPlace"), withMode("Recreate")), true},
	{"user info with groups and extra, dry run, options", strings.NewReplacer(`"userInfo":{`,
		`"userInfo":{"uid":"u","groups":["a",null],"extra":{"k\u0041":["v"],"e":null},`,
		`"dryRun":false`, `"dryRun":true,"options":{"kind":"CreateOptions"}`).Replace(podReview("CREATE", benchPod)), true},
	{"pod without metadata or spec", podReview("CREATE", `{"apiVersion":"v1","kind":"Pod"}`), true},
	{"pod with null metadata, spec and containers", podReview("CREATE", `{"metadata":null,"spec":{"containers":null,"initContainers":[]}}`), true},
	{"pod with empty labels, owners and resource lists", podReview("CREATE",
		`{"metadata":{"labels":{},"ownerReferences":[],"annotations":null},"spec":{"containers":[{"name":"a","resources":{"requests":{},"limits":null},"resizePolicy":[]}]}}`), true},
	{"pod-level resources", podReview("CREATE", `{"spec":{"resources":{"requests":{"cpu":"1"}},"containers":[]}}`), true},
	{"init containers and sidecars", podReview("CREATE", `{"spec":{"initContainers":[{"name":"setup","resources":{"requests":{"cpu":"1"}}},`+
		`{"name":"proxy","restartPolicy":"Always","resources":{"limits":{"memory":"64Mi"},"requests":null}},{"name":"bare","restartPolicy":null,"resources":null}],`+
		`"containers":[{"name":"app"}]}}`), true},
	{"quantities as numbers, null and with spaces", podReview("CREATE", `{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":1,"memory":null,"x":" 2 "}}}]}}`), true},
	{"escaped strings", podReview("CREATE", `{"metadata":{"name":"a\u0062","labels":{"k":"v\"w"}},"spec":{"containers":[{"name":"\u00e9"}]}}`), true},
	{"pod with a startup boost's annotation", podReview("CREATE", podJSON(`"annotations":{"vpaCpuStartupBoost/app":"{\"requests\":{\"cpu\":\"1\"}}", "b" : "c"},`, appContainer)), true},
	{"names and values in any order", `{"request":{"object":{"spec":{"containers":[{"resources":{"requests":{"cpu":"1"}},"name":"a"}]},"kind":"Pod","apiVersion":"v1"},` +
		`"operation":"CREATE","namespace":"ns","resource":{"resource":"pods","version":"v1","group":""},"uid":"x"},"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`, true},

	// Left to the reference path, whatever it answers.
	{"escaped name of a known field", strings.Replace(podReview("CREATE", benchPod), `"namespace":"default","operation"`, `"n\u0061mespace":"default","operation"`, 1), false},
	{"duplicate known field", strings.Replace(podReview("CREATE", benchPod), `"operation":"CREATE"`, `"operation":"UPDATE","operation":"CREATE"`, 1), false},
	{"duplicate object", strings.Replace(podReview("CREATE", benchPod), `"oldObject":null`, `"object":null`, 1), false},
	{"duplicate metadata", podReview("CREATE", `{"metadata":{"name":"a"},"metadata":null}`), false},
	{"duplicate label", podReview("CREATE", `{"metadata":{"labels":{"a":"1","a":"2"}}}`), false},
	{"duplicate quantity", podReview("CREATE", `{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"1","cpu":"2"}}}]}}`), false},
	{"null container", podReview("CREATE", `{"spec":{"containers":[null]}}`), false},
	{"null init container", podReview("CREATE", `{"spec":{"initContainers":[null,{"name":"proxy","restartPolicy":"Always"}],"containers":[]}}`), false},
	{"duplicate restart policy of a sidecar", podReview("CREATE", `{"spec":{"initContainers":[{"name":"proxy","restartPolicy":"Never","restartPolicy":"Always"}]}}`), false},
	{"null label value", podReview("CREATE", `{"metadata":{"labels":{"a":null}}}`), false},
	{"wrongly typed request field", strings.Replace(podReview("CREATE", benchPod), `"operation":"CREATE"`, `"operation":7`, 1), false},
	{"wrongly typed group", strings.Replace(podReview("CREATE", benchPod), `"userInfo":{`, `"userInfo":{"groups":[1],`, 1), false},
	{"wrongly typed pod field", podReview("CREATE", `{"spec":{"containers":{"name":"app"}}}`), false},
	{"wrongly typed owner reference", podReview("CREATE", `{"metadata":{"ownerReferences":[{"controller":"yes"}]}}`), false},
	{"malformed quantity", podReview("CREATE", `{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"lots"}}}]}}`), false},
	{"quantity over the bound", podReview("CREATE", `{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1e-99999999"}}}]}}`), false},
	{"a response", strings.Replace(podReview("CREATE", benchPod), `"request":`, `"response":{"uid":"x","allowed":true},"request":`, 1), false},
	{"wrong kind of review", strings.Replace(podReview("CREATE", benchPod), `"kind":"AdmissionReview"`, `"kind":"Pod"`, 1), false},
	{"pod of the wrong kind", podReview("CREATE", `{"apiVersion":"v1","kind":"Service"}`), false},
	{"no uid", strings.Replace(podReview("CREATE", benchPod), `"uid":"`+reviewUID+`",`, ``, 1), false},
	{"invalid UTF-8", podReview("CREATE", "{\"metadata\":{\"name\":\"a\xffb\"}}"), false},
	{"trailing data", podReview("CREATE", benchPod) + `{}`, false},
	{"not JSON", `{"apiVersion":`, false},
	{"empty", ``, false},
}

// TestFastDecodersAgreeWithTheReference: whatever the fast decoders accept,
// the reference path accepts too, with the same result; and they take the
// reviews the API server sends.
func TestFastDecodersAgreeWithTheReference(t *testing.T) {
	for _, tc := range fastPathCases {
		t.Run(tc.name, func(t *testing.T) {
			req, fast := checkFastReview(t, []byte(tc.body))
			if req != nil && req.Resource == podsResource {
				podFast := checkFastPod(t, req.Object.Raw, req.Namespace)
				fast = fast && podFast
			}
			assert.Equal(t, tc.wantFast, fast, "taken by the fast path")
		})
	}
}

// FuzzFastDecoders: on any input, the fast decoders answer as the reference
// path does or leave the answer to it.
func FuzzFastDecoders(f *testing.F) {
	for _, tc := range fastPathCases {
		f.Add([]byte(tc.body))
	}
	f.Add([]byte(benchPod))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _ := checkFastReview(t, body)
		if req != nil {
			checkFastPod(t, req.Object.Raw, req.Namespace)
		}
		// The input as a pod, too.
		checkFastPod(t, body, "")
	})
}

// checkFastReview decodes body on both paths, fails the test if the fast
// one's answer differs from the reference, and returns the reference's
// request (nil on error) and whether the fast path took the body.
func checkFastReview(t *testing.T, body []byte) (*admissionv1.AdmissionRequest, bool) {
	t.Helper()
	fast, ok := decodeReviewFast(body)
	ref, err := decodeReviewReference(body)
	if !ok {
		return ref, false
	}
	require.NoError(t, err, "the fast path took a review the reference refuses")
	// The fields the endpoints read.
	assert.Equal(t, ref.UID, fast.UID)
	assert.Equal(t, ref.Resource, fast.Resource)
	assert.Equal(t, ref.SubResource, fast.SubResource)
	assert.Equal(t, ref.RequestSubResource, fast.RequestSubResource)
	assert.Equal(t, ref.Name, fast.Name)
	assert.Equal(t, ref.Namespace, fast.Namespace)
	assert.Equal(t, ref.Operation, fast.Operation)
	assert.Equal(t, ref.DryRun, fast.DryRun)
	assert.Equal(t, ref.Object.Raw, fast.Object.Raw)
	assert.Equal(t, ref.OldObject.Raw, fast.OldObject.Raw)
	return ref, true
}

// checkFastPod is checkFastReview of a pod.
func checkFastPod(t *testing.T, raw []byte, namespace string) bool {
	t.Helper()
	pod, shape, ok := decodePodFast(raw, namespace)
	refPod, refShape, err := decodePodReference(raw, namespace)
	if !ok {
		return false
	}
	require.NoError(t, err, "the fast path took a pod the reference refuses")
	assert.Equal(t, refPod, pod)
	assert.Equal(t, refShape, shape)
	return true
}

// The fast path must read what the reference reads: a pod with every field
// it keeps set, compared field by field above, would hide a field both
// miss. This one checks the values themselves.
func TestFastPodDecoderReadsEveryField(t *testing.T) {
	pod, shape, ok := decodePodFast([]byte(benchPod), "")
	require.True(t, ok)
	assert.Equal(t, "web-7d9f8-", pod.GenerateName)
	assert.Equal(t, "default", pod.Namespace)
	assert.Equal(t, map[string]string{"app": "web", "pod-template-hash": "7d9f8"}, pod.Labels)
	require.Len(t, pod.OwnerReferences, 1)
	assert.Equal(t, "web-7d9f8", pod.OwnerReferences[0].Name)
	assert.True(t, *pod.OwnerReferences[0].Controller)
	require.Len(t, pod.Spec.Containers, 3)
	app := pod.Spec.Containers[0]
	assert.Equal(t, "app", app.Name)
	assert.Equal(t, "100m", app.Resources.Requests.Cpu().String())
	assert.Equal(t, "200Mi", app.Resources.Limits.Memory().String())
	assert.Equal(t, []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: "NotRequired"},
		{ResourceName: "memory", RestartPolicy: "RestartContainer"}}, app.ResizePolicy)
	require.Len(t, pod.Spec.InitContainers, 1)
	assert.Equal(t, corev1.ContainerRestartPolicyAlways, *pod.Spec.InitContainers[0].RestartPolicy)
	assert.Equal(t, &podShape{metadata: true, annotations: true, annotationsJSON: rawValue(`{"team":"web"}`), spec: true, containers: []containerShape{
		{resources: true, requests: true, limits: true, spec: containerSpecJSON{env: rawValue(`[{"name":"A","value":"b \"quoted\" \u00e9"}]`)}}, {resources: true}, {}},
		initContainers: []containerShape{{resources: true, requests: true}}}, shape)
}
