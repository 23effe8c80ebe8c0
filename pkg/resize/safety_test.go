package resize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestParseCanary(t *testing.T) {
	tests := []struct {
		value   string
		want    Canary
		wantErr string
		// of is Of(4): canaries among 4 pods.
		of int
	}{
		{value: "off", want: Canary{Off: true}, of: 0},
		{value: " 1 ", want: Canary{Pods: 1}, of: 1},
		{value: "3", want: Canary{Pods: 3}, of: 3},
		{value: "9", want: Canary{Pods: 9}, of: 3},
		{value: "25%", want: Canary{Percent: 25}, of: 1},
		{value: "30%", want: Canary{Percent: 30}, of: 2},
		{value: "100%", want: Canary{Percent: 100}, of: 3},
		{value: "0", wantErr: "neither"},
		{value: "-1", wantErr: "neither"},
		{value: "1001", wantErr: "neither"},
		{value: "0%", wantErr: "percentage"},
		{value: "101%", wantErr: "percentage"},
		{value: "1.5", wantErr: "neither"},
		{value: "on", wantErr: "neither"},
		{value: "", wantErr: "neither"},
		{value: "111111111111111111111111111111111", wantErr: "33 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := ParseCanary(tt.value)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.of, got.Of(4))
			assert.Zero(t, got.Of(1), "a VPA of one pod has no canary")
		})
	}
}

func TestParseObservationWindow(t *testing.T) {
	for value, want := range map[string]time.Duration{"30s": 30 * time.Second, "15m": 15 * time.Minute, " 24h ": 24 * time.Hour} {
		got, err := ParseObservationWindow(value)
		require.NoError(t, err, value)
		assert.Equal(t, want, got, value)
	}
	for _, value := range []string{"29s", "25h", "0", "-1m", "10", "forever", "1" + string(make([]byte, 40))} {
		_, err := ParseObservationWindow(value)
		assert.Error(t, err, value)
	}
}

func TestLowered(t *testing.T) {
	current := resources.Resources{"c": {Requests: testpod.List("1", "2Gi"), Limits: testpod.List("2", "2Gi")}}
	target := resources.Resources{"c": {Requests: testpod.List("2", "1Gi"), Limits: testpod.List("4", "1Gi")}}
	to, from := Lowered(current, target)
	assert.Equal(t, "c: requests memory=1Gi limits memory=1Gi", to.String())
	assert.Equal(t, "c: requests memory=2Gi limits memory=2Gi", from.String())
	to, from = Lowered(current, current)
	assert.Nil(t, to)
	assert.Nil(t, from)
}

func TestGate(t *testing.T) {
	pod := testpod.New("p").Container("c", "1", "2Gi").Running().Obj()
	hold := &Gate{Hold: reqs("c", "", "1Gi"), HoldWhy: "held after harm"}
	canary := &Gate{Wait: "canary p-0 watched until 12:40"}
	tests := []struct {
		name    string
		desired recommendation.Desired
		gate    *Gate
		action  Action
		reason  Reason
		patch   string
		message string
	}{
		{"no gate: the decrease goes", want("c", "1", "1Gi"), nil, ActionPatch, ReasonResize, `"memory":"1Gi"`, ""},
		{"a decrease to the held value is not made", want("c", "1", "1Gi"), hold, ActionSkip, ReasonHeldAfterHarm, "", "c requests memory not lowered: held after harm"},
		{"a decrease below the held value is not made", want("c", "1", "512Mi"), hold, ActionSkip, ReasonHeldAfterHarm, "", "held after harm"},
		{"a decrease above the held value is made", want("c", "1", "1536Mi"), hold, ActionPatch, ReasonResize, `"memory":"1536Mi"`, ""},
		{"an increase is made whatever the hold", want("c", "1", "3Gi"), hold, ActionPatch, ReasonResize, `"memory":"3Gi"`, ""},
		{"a decrease waits for the canary", want("c", "1", "1Gi"), canary, ActionWait, ReasonCanaryWait, "", "c requests memory not lowered yet: canary p-0"},
		{"an increase goes at once beside a canary", want("c", "2", "3Gi"), canary, ActionPatch, ReasonResize, `"cpu":"2","memory":"3Gi"`, ""},
		{"the increase of a mixed change goes, its decrease waits", want("c", "2", "1Gi"), canary, ActionPatch, ReasonResize, `"cpu":"2","memory":"2Gi"`, "memory not lowered yet"},
		{"held and waiting: the canary's wait is the reason", want("c", "500m", "1Gi"), &Gate{Hold: hold.Hold, HoldWhy: hold.HoldWhy, Wait: canary.Wait}, ActionWait, ReasonCanaryWait, "",
			"c requests cpu not lowered yet: canary p-0 watched until 12:40; c requests memory not lowered: held after harm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(Input{Pod: pod, Desired: tt.desired, Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true, Gate: tt.gate})
			assert.Equal(t, tt.action, d.Action, d.Message)
			assert.Equal(t, tt.reason, d.Reason, d.Message)
			if tt.patch != "" {
				assert.Contains(t, string(d.Patch), tt.patch)
			} else {
				assert.Empty(t, d.Patch)
			}
			assert.Contains(t, d.Message, tt.message)
		})
	}
}

func TestRevert(t *testing.T) {
	pod := testpod.New("p").Container("c", "2", "1Gi").Running().Obj()
	current := Current(pod, reqs("c", "", ""))
	// Lowered from 2Gi to 1Gi, and raised from 1 to 2 CPU at once: only
	// what was lowered goes back.
	from := resources.Resources{"c": {Requests: testpod.List("", "2Gi")}}
	back := RevertDesired(current, from)
	require.Equal(t, "c: requests memory=2Gi", back.String())
	desired := recommendation.Desired{"c": {Requests: back["c"].Requests}}
	d := Decide(Input{Pod: pod, Desired: desired, Threshold: 0.5, ServerMinor: 37, DisruptionAllowed: true, Revert: "container c OOMKilled",
		LastResize: &LastResize{At: t0, From: resources.Compact(reqs("c", "1", "2Gi")), To: reqs("c", "2", "1Gi")}, ReversalHold: time.Hour, Now: t0.Add(time.Minute)})
	assert.Equal(t, ActionPatch, d.Action, d.Message)
	assert.Equal(t, ReasonRevert, d.Reason)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"2","memory":"2Gi"}}}]}}`, string(d.Patch))
	assert.Contains(t, d.Message, "container c OOMKilled")
	assert.Nil(t, RevertDesired(Current(testpod.New("p").Container("c", "2", "2Gi").Running().Obj(), from), from), "nothing left to raise back")
}

// A revert undoes harm: a closed resize window (scope all) does not hold it
// back, while the same resize without harm waits for the window.
func TestRevertIsNotHeldByAResizeWindow(t *testing.T) {
	pod := testpod.New("p").Container("c", "2", "1Gi").Running().Obj()
	desired := recommendation.Desired{"c": {Requests: testpod.List("", "2Gi")}}
	closed := Windows{All: WindowHold{Held: true, Until: t0.Add(time.Hour), Why: "Mon-Fri 01:00-05:00 UTC"}}
	in := Input{Pod: pod, Desired: desired, Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true, Now: t0, Windows: closed}

	d := Decide(in)
	assert.Equal(t, ActionWait, d.Action, d.Message)
	assert.Equal(t, ReasonOutsideWindow, d.Reason)

	in.Revert = "container c OOMKilled"
	d = Decide(in)
	assert.Equal(t, ActionPatch, d.Action, d.Message)
	assert.Equal(t, ReasonRevert, d.Reason)
}
