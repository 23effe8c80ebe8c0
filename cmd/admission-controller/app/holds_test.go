package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/vpa-inplace/vpa-inplace/pkg/admission"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testcert"
)

// The binary reads the updater's holds after harm from --records-namespace,
// those of its --records-prefix alone: a new pod of a VPA whose hold stands
// gets the memory it had before the harm, not the recommendation the hold
// holds; another install's records in the same namespace (another prefix)
// hold nothing here.
func TestRunReadsTheHoldsOfTheRecordsNamespace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	pair := testcert.New(t, "vpa-inplace-webhook")
	opts := NewOptions()
	opts.RecordsNamespace = "vpa-inplace-records"
	opts.RecordsPrefix = "platform-vpa-inplace-records-"
	opts.TLSCertFile, opts.TLSPrivateKeyFile = pair.Write(t, t.TempDir())
	require.Empty(t, opts.Validate())
	kube, vpas := cluster()
	uid := types.UID("uid-web")
	put := func(prefix string, held corev1.ResourceName, at, from string) {
		hold := &records.Record{Kind: records.KindHarmHold,
			Attempted: resources.Resources{"app": {Requests: corev1.ResourceList{held: resource.MustParse(at)}}},
			From:      resources.Resources{"app": {Requests: corev1.ResourceList{held: resource.MustParse(from)}}},
			Message:   "web-0: container app OOMKilled", RecordedAt: time.Now(), Until: time.Now().Add(time.Hour), Holds: 1}
		value, _, err := records.EncodeCompact(map[types.UID]*records.Record{uid: hold}, records.DefaultMaxCompactBytes)
		require.NoError(t, err)
		_, err = kube.CoreV1().ConfigMaps(opts.RecordsNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: records.ConfigMapNameWithPrefix(prefix, records.StoreSafety, uid), Namespace: opts.RecordsNamespace,
				Labels: map[string]string{records.LabelStore: records.StoreSafety},
				Annotations: map[string]string{records.AnnotationVPANamespace: "default", records.AnnotationVPAName: "web",
					records.AnnotationVPAUID: string(uid)},
			},
			Data: map[string]string{records.ConfigMapDataKey: value},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	put(opts.RecordsPrefix, corev1.ResourceMemory, "300Mi", "400Mi")
	// Another install's, of the default prefix: it would hold the cpu.
	put(records.DefaultConfigMapPrefix, corev1.ResourceCPU, "300m", "500m")

	l, done, _, _ := startServer(t, ctx, opts, kube, vpas)
	require.Eventually(t, func() bool { return l.get(opts.WebhookAddress()) != "" }, 30*time.Second, 10*time.Millisecond)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pair.Pool(), MinVersion: tls.VersionTLS12},
	}}
	resp := postReview(t, client, "https://"+l.get(opts.WebhookAddress())+admission.MutatePodsPath, podCreateReview)
	require.True(t, resp.Allowed)
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	patched, err := patch.Apply([]byte(podCreated))
	require.NoError(t, err)
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal(patched, &pod))
	assert.Zero(t, pod.Spec.Containers[0].Resources.Requests.Cpu().Cmp(resource.MustParse("300m")),
		"cpu is not held: another install's hold is not read, got %s", pod.Spec.Containers[0].Resources.Requests.Cpu())
	assert.Zero(t, pod.Spec.Containers[0].Resources.Requests.Memory().Cmp(resource.MustParse("400Mi")),
		"memory: what it had before the harm, got %s", pod.Spec.Containers[0].Resources.Requests.Memory())
	assert.Contains(t, pod.Annotations[admission.HoldAnnotation], "held after harm (web-0: container app OOMKilled)")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
