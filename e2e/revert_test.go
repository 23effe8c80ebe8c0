//go:build e2e

package e2e

// Undoing harm is not a change to time (docs/safety-after-resize.md, the
// gates): a freeze holds every change of its VPA's pods but a revert.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freezeAnnotation freezes a VPA's resizes until the time it names.
const freezeAnnotation = "vpa-inplace.dev/freeze-until"

// A VPA frozen with freeze-until after its canary was lowered: the canary
// OOM-killed is resized back in place while the freeze stands, and the
// other pod is neither lowered nor resized.
func TestAFrozenVPAsCanaryOOMKilledIsRevertedWhileTheFreezeStands(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", replicas: 2, requests: rl("100m", "200Mi"), limits: rl("", "200Mi")})
	uids := map[string]string{}
	for _, p := range pods {
		uids[p.Name] = string(p.UID)
	}
	canaryVPA(t, ns, "web")
	// Watched for 5 minutes (hack/e2e.sh's default is 20 s): time to see
	// the freeze in the condition before the harm.
	annotateVPA(t, ns, "web", map[string]string{"vpa-inplace.dev/observation-window": "5m"})
	recommend(t, ns, "web", "100m", "100Mi")

	var canary string
	waitFor(t, eventually, "one canary lowered to 100Mi", func(context.Context) (bool, error) {
		l := lowered(t, ns, "web", "100Mi")
		if len(l) > 0 {
			canary = l[0]
		}
		return len(l) == 1, nil
	})
	low := waitResized(t, ns, canary, "100m", "100Mi")
	waitEvent(t, ns, canary, eventCanary, 1)

	// Frozen for an hour from now: no change goes, as the condition says.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	annotateVPA(t, ns, "web", map[string]string{freezeAnnotation: until.Format(time.RFC3339)})
	waitConditionMessage(t, ns, "web", "frozen until "+until.Format(time.RFC3339))

	// Within the canary's window, its container is OOM-killed once.
	oomKill(t, ns, canary, low.Status.ContainerStatuses[0].RestartCount)
	waitEvent(t, ns, canary, eventHarmed, 1)
	back := waitResized(t, ns, canary, "100m", "200Mi")
	require.True(t, time.Now().Before(until), "reverted while the freeze stands")
	assert.Equal(t, uids[canary], string(back.UID), "reverted in place: the same pod")
	waitEvent(t, ns, canary, eventReverted, 1)

	for _, p := range podsOf(t, ns, "web") {
		if p.Name == canary {
			continue
		}
		assert.Equal(t, "200Mi", memoryRequest(&p), "pod %s is not lowered", p.Name)
		assert.Equal(t, uids[p.Name], string(p.UID))
	}
	requireStablePods(t, ns, pods, canary)
}
