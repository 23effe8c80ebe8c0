package window

import (
	"testing"
	"time"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/window"
)

// BenchmarkGateFor is what every pod decision adds: the VPA's windows and
// freeze read at that moment, with no annotation (most VPAs), with a
// closed window (the next opening is computed) and with the namespace's
// window beside the VPA's.
func BenchmarkGateFor(b *testing.B) {
	now := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	nightly := map[string]string{window.WindowAnnotation: "Mon-Fri 01:00-05:00 Europe/Berlin; Sat,Sun 00:00-24:00 UTC"}
	for _, bc := range []struct {
		name    string
		vpa, ns map[string]string
	}{
		{"no annotation", nil, nil},
		{"closed window on the VPA", nightly, nil},
		{"closed windows on the VPA and its namespace", nightly, map[string]string{window.WindowAnnotation: "* 02:00-03:00 UTC"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			vpa := testvpa.New("web").InPlace().Obj()
			vpa.Namespace, vpa.Annotations = "default", bc.vpa
			g := New(Config{}, namespaces(b, namespace(bc.ns)))
			b.ReportAllocs()
			for b.Loop() {
				g.For(vpa, now)
			}
		})
	}
}
