package updater

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// A canary's record written by an earlier version, its watch's start in a
// field of its own and no watch: the updater takes its watch up from
// there (the other pods wait for the canary's window, and go once it has
// passed), and its record is written again in one shape, the start in the
// watch.
func TestACanaryRecordOfAnEarlierVersionIsWatchedAndWrittenAgain(t *testing.T) {
	began := t0.Add(-time.Minute)
	old := `{"version":1,"attempts":[{"kind":"Canary","resources":{"c":{"requests":{"memory":"50Mi"}}},` +
		`"from":{"c":{"requests":{"memory":"100Mi"}}},"since":` + strconv.FormatInt(began.Unix(), 10) + `}],` +
		`"pods":{"uid-p0":{"attempt":0,"recordedAt":"` + began.UTC().Format(time.RFC3339) + `"}}}`
	vpa := inPlaceVPA("100m", "50Mi")
	vpa.Annotations = map[string]string{durableSafetyKey: old}
	// The canary, lowered by the earlier version.
	pods := []*corev1.Pod{webPod("p0").Obj(), webPod("p1").Running().Obj(), webPod("p2").Running().Obj()}
	pods[0] = testpod.New("p0").Container("c", "100m", "50Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj()
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{durableSafety: true})
	require.NoError(t, f.ctrl.safetyStore.Load(f.ctx))
	r, ok := f.ctrl.safetyStore.Get("uid-p0")
	require.True(t, ok)
	assert.True(t, began.Equal(r.CanarySince()), "its watch's start, in its watch: %s", r.CanarySince())

	require.NoError(t, f.sync("p0"))
	for i := 1; i < 3; i++ {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Empty(t, f.resizedPods(), "the others wait for the canary's window")

	stop := f.runSafetyStore()
	require.Eventually(t, func() bool {
		v := f.getVPA("web").Annotations[durableSafetyKey]
		return !strings.Contains(v, strconv.FormatInt(began.Unix(), 10)) && strings.Contains(v, `"canary":true`)
	}, waitFor, every, "written again in one shape")
	stop()

	f.clock.Step(observationWindowDefault)
	require.NoError(t, f.sync("p0"))
	for i := 1; i < 3; i++ {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Equal(t, []string{"p1", "p2"}, f.resizedPods(), "the canary passed: the others go")
}
