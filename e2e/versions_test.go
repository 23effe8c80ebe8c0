//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// The cluster's versions, and what differs with them. Each profile runs
// one control plane and one kubelet version (hack/cluster/up.sh):
//
//	v1.38          API server 1.38, kubelets 1.38
//	v1.37          API server 1.37, kubelets 1.37
//	v1.35-kubelet  API server 1.37 without PodResizeValidator, kubelets 1.35
//	v1.34          API server 1.34, kubelets 1.34
//
// Every switch on a version below reads the versions the cluster reports,
// not the profile's name, so that a new profile needs no new branch.
//
// A test that needs a newer (or older) Kubernetes than the cluster's skips
// with requireServerMinor or requireServerMinorBelow, whose message says
// what it needs and why. hack/e2e.sh lists every skip, with its message,
// in its summary: a skip is never counted as a pass, and a skip of a test
// the profile must run fails the profile.

// profileV134 is the profile whose control plane and kubelets are v1.34.
const profileV134 = "v1.34"

var (
	versionsOnce               sync.Once
	serverMinor, kubeletMinor  int
	serverGit, kubeletVersions string
	versionsErr                error
)

// clusterVersions reads the API server's minor version and the oldest
// kubelet minor version of the nodes, once.
func clusterVersions(t *testing.T) (server, kubelet int) {
	t.Helper()
	versionsOnce.Do(func() {
		v, err := kube.Discovery().ServerVersion()
		if err != nil {
			versionsErr = err
			return
		}
		serverGit = v.GitVersion
		if serverMinor, err = minorOf(v.GitVersion); err != nil {
			versionsErr = err
			return
		}
		nodes, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			versionsErr = err
			return
		}
		var seen []string
		for _, n := range nodes.Items {
			m, err := minorOf(n.Status.NodeInfo.KubeletVersion)
			if err != nil {
				versionsErr = err
				return
			}
			if kubeletMinor == 0 || m < kubeletMinor {
				kubeletMinor = m
			}
			seen = append(seen, n.Name+"="+n.Status.NodeInfo.KubeletVersion)
		}
		kubeletVersions = strings.Join(seen, ",")
	})
	require.NoError(t, versionsErr, "reading the cluster's versions")
	return serverMinor, kubeletMinor
}

func minorOf(v string) (int, error) {
	parsed, err := version.ParseGeneric(v)
	if err != nil {
		return 0, err
	}
	return int(parsed.Minor()), nil
}

// requireServerMinor skips the test on an API server older than 1.minor,
// saying why: needs names what the test relies on that arrived in 1.minor.
func requireServerMinor(t *testing.T, minor int, needs string) {
	t.Helper()
	if server, _ := clusterVersions(t); server < minor {
		t.Skipf("needs Kubernetes 1.%d or later, the API server is %s: %s", minor, serverGit, needs)
	}
}

// requireServerMinorBelow skips the test on an API server of 1.minor or
// later, saying why: it covers behaviour that ended with 1.minor.
func requireServerMinorBelow(t *testing.T, minor int, covers string) {
	t.Helper()
	if server, _ := clusterVersions(t); server >= minor {
		t.Skipf("covers Kubernetes before 1.%d, the API server is %s: %s", minor, serverGit, covers)
	}
}

// admissionRefusesOverCapacity tells whether the API server refuses a
// resize beyond the node's allocatable at admission (403 NodeCapacity): the
// PodResizeValidator admission plugin, 1.36+, on by default (the
// v1.35-kubelet profile disables it).
func admissionRefusesOverCapacity(t *testing.T) bool {
	server, _ := clusterVersions(t)
	return server >= 36 && profile != profileV135Kubelet
}

// kubeletRefusesOverCapacity tells whether the kubelets mark a resize
// beyond the node's allocatable PodResizePending/Infeasible ("Node didn't
// have enough capacity"): kubelets up to 1.35, once the API server has let
// the resize through.
func kubeletRefusesOverCapacity(t *testing.T) bool {
	_, kubelet := clusterVersions(t)
	return kubelet <= 35 && !admissionRefusesOverCapacity(t)
}

// podLevelResizes tells whether a resize moves the pod-level resources with
// the containers': an API server of 1.36 or later (pod-level resize beta,
// on) and kubelets of 1.36 or later, which declare the feature
// InPlacePodLevelResourcesVerticalScaling. Older kubelets (the
// v1.35-kubelet profile) do not: the containers are kept within the pod
// level.
func podLevelResizes(t *testing.T) bool {
	server, kubelet := clusterVersions(t)
	return server >= 36 && kubelet >= 36
}

// limitRangerChecksOnlyChanges tells whether the API server's LimitRanger
// checks only the values a resize changes (1.38+); before, it checks a
// resized pod whole, as a new one.
func limitRangerChecksOnlyChanges(t *testing.T) bool {
	server, _ := clusterVersions(t)
	return server >= 38
}

// apiServerFeatureEnabled tells whether the API server runs with the
// feature gate on, from its kubernetes_feature_enabled metric; a gate the
// server does not know is off. The profiles give the same gates to every
// component (hack/cluster/up.sh CLUSTER_FEATURE_GATES).
func apiServerFeatureEnabled(t *testing.T, gate string) bool {
	t.Helper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctxFor(t))
	require.NoError(t, err, "reading the API server's metrics")
	series := `kubernetes_feature_enabled{name="` + gate + `"`
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, series) {
			return strings.HasSuffix(strings.TrimSpace(line), " 1")
		}
	}
	return false
}
