package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// Objects from informers carry no kind: the recorder must know VPAs, or
// every event on a VPA is dropped.
func TestRecorderRecordsOnPodsAndVPAs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	recorder, stop, err := newRecorder(ctx, kube)
	require.NoError(t, err)
	defer stop()

	vpa := testvpa.New("web").Obj()
	vpa.TypeMeta = metav1.TypeMeta{}
	recorder.Eventf(vpa, corev1.EventTypeWarning, "InPlaceResizeInfeasible", "Pod %s: no room", "p")
	recorder.Eventf(testpod.New("p").Obj(), corev1.EventTypeWarning, "InPlaceResizeInfeasible", "no room")

	var kinds []string
	require.Eventually(t, func() bool {
		list, err := kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		kinds = nil
		for _, e := range list.Items {
			kinds = append(kinds, e.InvolvedObject.Kind+"/"+e.InvolvedObject.APIVersion)
		}
		return len(kinds) == 2
	}, time.Minute, 20*time.Millisecond)
	assert.ElementsMatch(t, []string{"VerticalPodAutoscaler/autoscaling.k8s.io/v1", "Pod/v1"}, kinds)
}

func TestKillSwitchWatchesOneConfigMapInItsNamespace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kube := kubefake.NewClientset()
	o := NewOptions(features.NewFeatureGate())
	k, err := newKillSwitch(kube, o)
	require.NoError(t, err)
	assert.Equal(t, "vpa-inplace-system/vpa-inplace-updater-config", k.name.String())
	require.NotNil(t, k.informer)
	k.informer.Informer() // registered before start, as the controller does
	k.start(ctx)
	defer func() { cancel(); k.shutdown() }() // Shutdown waits for the informers, which stop with ctx
	require.True(t, cache.WaitForCacheSync(ctx.Done(), k.informer.Informer().HasSynced))

	var lists []clienttesting.ListActionImpl
	for _, a := range kube.Actions() {
		if l, ok := a.(clienttesting.ListActionImpl); ok && a.GetResource().Resource == "configmaps" {
			lists = append(lists, l)
		}
	}
	require.NotEmpty(t, lists)
	for _, l := range lists {
		assert.Equal(t, "vpa-inplace-system", l.GetNamespace(), "never cluster-wide")
		assert.Equal(t, "metadata.name=vpa-inplace-updater-config", l.GetListOptions().FieldSelector,
			"by name, so that a Role limited to that name allows it")
	}

	t.Run("no ConfigMap, no switch", func(t *testing.T) {
		o.ConfigMap = ""
		k, err := newKillSwitch(kube, o)
		require.NoError(t, err)
		assert.Nil(t, k.informer)
		k.start(ctx)
		k.shutdown()
	})
}

// Issue #32, item 5: a records namespace that is missing or not writable
// stops the updater at start, saying what to do; an API server that does
// not answer yet does not (the first Load checks again).
func TestStartRefusesARecordsNamespaceItCannotWrite(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"missing", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "vpa-inplace-system"),
			`--records-namespace vpa-inplace-system: records namespace missing or not writable: namespace "vpa-inplace-system" does not exist; create it, or set --records-namespace`},
		{"not writable", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no RBAC policy matched")),
			`ConfigMaps cannot be created in namespace "vpa-inplace-system"`},
		{"no verdict yet", apierrors.NewServiceUnavailable("apiserver starting"), ""},
		{"writable", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			var dryRun []string
			var name string
			kube.PrependReactor("create", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
				create := a.(clienttesting.CreateActionImpl)
				dryRun, name = create.CreateOptions.DryRun, create.Object.(metav1.Object).GetName()
				return true, nil, tc.err
			})
			err := checkRecordsNamespace(ctx, kube.CoreV1(), "vpa-inplace-system", "platform-vpa-inplace-records-")
			assert.Equal(t, []string{metav1.DryRunAll}, dryRun, "nothing is created")
			assert.Equal(t, "platform-vpa-inplace-records-infeasible-write-check", name,
				"a records ConfigMap of this install's name, which its admission policy lets it write")
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, records.ErrNotWritable)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// Serving one namespace, the updater still sees every pod bound to a node,
// for fits-node: listed cluster-wide, bound and not terminated only,
// trimmed. Serving every namespace, the pods' own cache is that view.
func TestNodePodsSeeEveryNamespace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kube := kubefake.NewClientset(
		testpod.New("kafka-0").Namespace("kafka").Container("c", "1", "1Gi").Running().Obj(),
		testpod.New("agent").Namespace("kube-system").Container("c", "2", "1Gi").Running().Obj(),
	)
	pods := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace("kafka"))
	nodePods, factory := newNodePods(kube, "kafka", pods)
	informer := nodePods.Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))
	var names []string
	for _, o := range informer.GetStore().List() {
		p := o.(*corev1.Pod)
		names = append(names, p.Namespace+"/"+p.Name)
		assert.Nil(t, p.Labels, "trimmed to what fits-node reads")
	}
	assert.ElementsMatch(t, []string{"kafka/kafka-0", "kube-system/agent"}, names)
	for _, a := range kube.Actions() {
		if l, ok := a.(clienttesting.ListActionImpl); ok && a.GetResource().Resource == "pods" {
			assert.Empty(t, l.GetNamespace(), "cluster-wide")
			assert.Equal(t, "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed", l.GetListOptions().FieldSelector)
		}
	}

	t.Run("serving every namespace, the pods' own cache", func(t *testing.T) {
		pods := informers.NewSharedInformerFactory(kube, 0)
		nodePods, factory := newNodePods(kube, metav1.NamespaceAll, pods)
		assert.Same(t, pods, factory)
		assert.True(t, nodePods.Informer().GetIndexer() == pods.Core().V1().Pods().Informer().GetIndexer())
	})
}
