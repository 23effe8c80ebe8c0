package proxy

import (
	"net/http/httptest"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url, want string
	}{
		{"GET", "/api/v1/pods?limit=500", "list pods"},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=1", "watch pods"},
		{"GET", "/api/v1/namespaces/a/pods/p", "get pods"},
		{"PATCH", "/api/v1/namespaces/a/pods/p/resize", "patch pods/resize"},
		{"PATCH", "/api/v1/namespaces/a/pods/p", "patch pods"},
		{"POST", "/api/v1/namespaces/a/events", "create events"},
		{"PATCH", "/api/v1/namespaces/a/events/e", "patch events"},
		{"PUT", "/apis/autoscaling.k8s.io/v1/namespaces/a/verticalpodautoscalers/v/status", "update verticalpodautoscalers/status"},
		{"GET", "/apis/apps/v1/namespaces/a/deployments/d/scale", "get deployments/scale"},
		{"GET", "/api/v1/namespaces/a", "get namespaces"},
		{"PUT", "/api/v1/namespaces/a/finalize", "update namespaces/finalize"},
		{"GET", "/api/v1/namespaces", "list namespaces"},
		{"DELETE", "/api/v1/namespaces/a/pods", "deletecollection pods"},
		{"GET", "/apis", "get discovery"},
		{"GET", "/apis/apps/v1", "get discovery"},
		{"GET", "/version", "get discovery"},
	} {
		got := Classify(httptest.NewRequest(tc.method, tc.url, nil)).String()
		if got != tc.want {
			t.Errorf("%s %s: got %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestCountsAdd(t *testing.T) {
	resize := Key{Verb: "patch", Resource: "pods", Subresource: "resize"}
	renew := Key{Verb: "update", Resource: "leases"}
	a := Counts{resize: 3}
	b := Counts{resize: 2, renew: 1}
	sum := a.Add(b)
	if sum[resize] != 5 || sum[renew] != 1 || len(sum) != 2 {
		t.Errorf("got %v, want patch pods/resize=5, update leases=1", sum)
	}
	if a[resize] != 3 || len(a) != 1 {
		t.Errorf("Add changed its receiver: %v", a)
	}
}
