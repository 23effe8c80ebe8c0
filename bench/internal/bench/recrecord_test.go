package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func ps(s int, uid string, gen int64, cpu, mem int64) podSample {
	return podSample{At: at(s), UID: types.UID(uid), Generation: gen, Requests: amounts{CPU: cpu, Memory: mem << 20}}
}

func ts(s int, cpu, mem int64) targetSample {
	return targetSample{At: at(s), Target: amounts{CPU: cpu, Memory: mem << 20}}
}

func TestResizesBetween(t *testing.T) {
	tl := []podSample{
		ps(0, "a", 1, 20, 32),
		ps(30, "a", 2, 115, 127), // before the window: not counted
		ps(100, "a", 3, 115, 145),
		ps(110, "a", 3, 115, 145), // same generation (status only)
		ps(130, "a", 5, 115, 127), // two generations at once: two changes
		ps(200, "a", 6, 115, 145), // after the window
	}
	cases := []struct {
		name          string
		from, to      int
		want, replace int
	}{
		{"window with three", 60, 160, 3, 0},
		{"whole history", -1, 300, 5, 0},
		{"boundary from excluded, to included", 100, 130, 2, 0},
		{"empty window", 140, 190, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, replaced := resizesBetween(tl, at(c.from), at(c.to))
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.replace, replaced)
		})
	}
	t.Run("a replaced pod is not a resize", func(t *testing.T) {
		got, replaced := resizesBetween([]podSample{ps(0, "a", 2, 1, 1), ps(10, "b", 1, 1, 1), ps(20, "b", 2, 2, 2)}, at(0), at(30))
		assert.Equal(t, 1, got)
		assert.Equal(t, 1, replaced)
	})
}

func TestTargetChangesBetween(t *testing.T) {
	tl := []targetSample{
		ts(0, 100, 121),
		ts(20, 105, 121), // 5 %: below the threshold
		ts(40, 105, 145), // memory +20 %
		ts(60, 105, 127), // memory -12 %
		ts(80, 140, 127), // cpu +33 %
	}
	assert.Equal(t, 3, targetChangesBetween(tl, at(0), at(100), 0.1))
	assert.Equal(t, 1, targetChangesBetween(tl, at(40), at(70), 0.1), "(from, to]")
	assert.Equal(t, 4, targetChangesBetween(tl, at(0), at(100), 0.01))
}

func TestStepLatency(t *testing.T) {
	cases := []struct {
		name string
		pod  []podSample
		tgt  []targetSample
		// seconds; -1: not seen
		recCPU, resCPU, recMem, resMem int
	}{
		{
			name:   "memory first, then cpu",
			pod:    []podSample{ps(0, "a", 2, 115, 127), ps(25, "a", 3, 115, 380), ps(95, "a", 4, 350, 380)},
			tgt:    []targetSample{ts(0, 115, 127), ts(20, 115, 380), ts(30, 120, 380), ts(70, 300, 380)},
			recCPU: 70, resCPU: 95, recMem: 20, resMem: 25,
		},
		{
			// The old target flapped above the pod's requests before the
			// step: a flap back there is not the step's recommendation.
			name:   "flap of the old target is not the step",
			pod:    []podSample{ps(0, "a", 2, 115, 127), ps(20, "a", 3, 115, 145), ps(90, "a", 4, 340, 360)},
			tgt:    []targetSample{ts(-5, 115, 145), ts(15, 115, 127), ts(18, 115, 145), ts(60, 330, 360)},
			recCPU: 60, resCPU: 90, recMem: 60, resMem: 90,
		},
		{
			name:   "never resized",
			pod:    []podSample{ps(0, "a", 2, 115, 127)},
			tgt:    []targetSample{ts(0, 115, 127), ts(40, 300, 127)},
			recCPU: 40, resCPU: -1, recMem: -1, resMem: -1,
		},
		{
			name:   "no recommendation after the step",
			pod:    []podSample{ps(0, "a", 2, 115, 127)},
			tgt:    []targetSample{ts(0, 115, 127)},
			recCPU: -1, resCPU: -1, recMem: -1, resMem: -1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := stepLatency(c.pod, c.tgt, at(10), 0.1)
			check := func(what string, got time.Time, want int) {
				t.Helper()
				if want < 0 {
					assert.True(t, got.IsZero(), "%s: got %v", what, got)
					return
				}
				assert.Equal(t, at(want), got, what)
			}
			check("cpu recommended", st.RecommendedCPU, c.recCPU)
			check("cpu resized", st.ResizedCPU, c.resCPU)
			check("memory recommended", st.RecommendedMemory, c.recMem)
			check("memory resized", st.ResizedMemory, c.resMem)
			check("recommended", st.Recommended, firstOf(c.recCPU, c.recMem))
			check("resized", st.Resized, firstOf(c.resCPU, c.resMem))
		})
	}
}

func firstOf(a, b int) int {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}
