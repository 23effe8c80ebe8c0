//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	windowAnnotation = "vpa-inplace.dev/resize-window"
	eventResizeHeld  = "InPlaceResizeHeld"
)

// (c) of issue #34: a resize window opening 40 s from now. A decrease waits
// (held, said in an event) and goes when the window opens, on the updater's
// timer; an increase of another VPA with the same window goes at once.
func TestResizeWindowHoldsADecreaseUntilItOpens(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	down := deploy(t, ns, workload{name: "down", requests: rl("200m", "200Mi")})
	up := deploy(t, ns, workload{name: "up", requests: rl("100m", "100Mi")})
	beforeDown, beforeUp := snap(down), snap(up)

	// Seconds matter: the window opens at opens and lasts an hour (UTC).
	opens := time.Now().UTC().Add(40 * time.Second).Truncate(time.Second)
	value := fmt.Sprintf("* %s-%s UTC", opens.Format("15:04:05"), opens.Add(time.Hour).Format("15:04:05"))
	for _, name := range []string{"down", "up"} {
		newVPA(t, ns, name, vpatypes.UpdateModeInPlace, nil)
		annotateVPA(t, ns, name, map[string]string{windowAnnotation: value})
	}

	recommend(t, ns, "up", "200m", "150Mi")
	recommend(t, ns, "down", "100m", "100Mi")
	// The increase goes at once.
	waitResized(t, ns, up[0].Name, "200m", "150Mi")
	upAt := time.Now()
	require.True(t, upAt.Before(opens), "the increase went before the window opened")

	// The decrease is held, and says so.
	waitEvent(t, ns, down[0].Name, eventResizeHeld, 1)
	held := events(t, ns, down[0].Name, eventResizeHeld)
	require.NotEmpty(t, held)
	assert.Contains(t, held[0].Message, "opens at "+opens.Format(time.RFC3339))
	require.True(t, time.Now().Before(opens), "the hold was seen before the window opened")
	assert.Equal(t, "200m", getPod(t, ns, down[0].Name).Spec.Containers[0].Resources.Requests.Cpu().String(), "not lowered before the window")
	assert.Zero(t, eventCount(t, ns, down[0].Name, eventSent), "nothing sent before the window")

	// It goes when the window opens, not before: the updater's timer, no
	// new event from the test.
	time.Sleep(time.Until(opens))
	waitResized(t, ns, down[0].Name, "100m", "100Mi")
	sent := events(t, ns, down[0].Name, eventSent)
	require.Len(t, sent, 1)
	at := sent[0].FirstTimestamp.Time
	if at.IsZero() {
		at = sent[0].EventTime.Time
	}
	assert.False(t, at.Before(opens), "sent at %s, the window opened at %s", at, opens)
	t.Logf("increase applied %.1fs before the window opened; decrease sent %.1fs after it opened",
		opens.Sub(upAt).Seconds(), at.Sub(opens).Seconds())
	requireNotDisrupted(t, ns, "down", beforeDown)
	requireNotDisrupted(t, ns, "up", beforeUp)
}
