package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
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

// The report says over how many namespaces the workload was spread, and
// says nothing of it with one.
func TestMarkdownNamesTheNamespaces(t *testing.T) {
	o := &Options{Namespace: "rb", Namespaces: 1, Ours: UpdaterSpec{Name: "ours"}}
	rep := &Report{Options: o, Results: []*Result{{Spec: o.Ours}}}
	if md := rep.Markdown(""); strings.Contains(md, "namespaces") {
		t.Errorf("a run in one namespace speaks of namespaces:\n%s", md)
	}
	o.Namespaces = 100
	if md := rep.Markdown(""); !strings.Contains(md, "spread over 100 namespaces, round robin (`000-rb` to `099-rb`)") {
		t.Errorf("a run over 100 namespaces does not say so:\n%s", md)
	}
}

// The Leases' renewals go on whatever changes: they are not a change's
// writes.
func TestChangesCountLeasesApart(t *testing.T) {
	resize := proxy.Key{Verb: "patch", Resource: "pods", Subresource: "resize"}
	renew := proxy.Key{Verb: "update", Resource: "leases"}
	r := &Result{
		Burst: groupResult{Accepted: make([]time.Duration, 10)},
		Phases: []Phase{
			{Name: "isolated", Requests: proxy.Counts{renew: 30}},
			{Name: "burst", Requests: proxy.Counts{resize: 10, renew: 12, {Verb: "create", Resource: "events"}: 10}},
		},
	}
	c := r.changes()
	if c.Writes != 10 || c.Leases != 42 || c.Events != 10 || c.Actuated != 10 {
		t.Errorf("got %d writes, %d Lease writes, %d events for %d changes; want 10, 42, 10 for 10", c.Writes, c.Leases, c.Events, c.Actuated)
	}
}
