package bench

import (
	"strings"
	"testing"
)

// The ratio sentence explains the ratio column, which only a run of both
// updaters has.
func TestMarkdownExplainsRatiosOnlyWithTwoUpdaters(t *testing.T) {
	o := &Options{Ours: UpdaterSpec{Name: "ours"}, Upstream: UpdaterSpec{Name: "upstream"}}
	one := &Report{Options: o, Results: []*Result{{Spec: o.Ours}}}
	two := &Report{Options: o, Results: []*Result{{Spec: o.Ours}, {Spec: o.Upstream}}}
	const ratios = "Ratios are ours ÷ upstream"
	if md := one.Markdown("make bench BENCH_ONLY=ours"); strings.Contains(md, ratios) {
		t.Errorf("a run of ours alone explains a ratio it does not show:\n%s", md)
	}
	if md := two.Markdown(""); !strings.Contains(md, ratios) || !strings.Contains(md, "ours ÷ upstream |") {
		t.Errorf("a run of both lacks its ratio column or its explanation:\n%s", md)
	}
}
