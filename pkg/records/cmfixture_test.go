package records

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// cmFixture runs ConfigMapStores on a fake clientset whose records namespace
// serves ConfigMaps as the API server does.
type cmFixture struct {
	*storeFixture
	kube   *kubefake.Clientset
	server *configMapServer
}

// newCMFixture serves the records namespace's ConfigMaps as the API server
// does (configMapServer).
func newCMFixture(t *testing.T, configMaps []runtime.Object, vpas ...*vpatypes.VerticalPodAutoscaler) *cmFixture {
	kube := kubefake.NewClientset()
	cms := make([]*corev1.ConfigMap, len(configMaps))
	for i, o := range configMaps {
		cms[i] = o.(*corev1.ConfigMap)
	}
	return &cmFixture{storeFixture: newStoreFixture(t, vpas...), kube: kube, server: serveConfigMaps(kube, []string{recordsNamespace}, cms...)}
}

// startCM returns a loaded store whose writer runs until stop is called or
// the test ends.
func (f *cmFixture) startCM(cfg ConfigMapStoreConfig) (s *ConfigMapStore, stop func()) {
	f.t.Helper()
	cfg.Namespace = recordsNamespace
	if cfg.Store == "" {
		cfg.Store = StoreInfeasible
	}
	s, err := NewConfigMapStore(f.kube.CoreV1(), f.client.AutoscalingV1(), f.lister, cfg)
	require.NoError(f.t, err)
	observeWrites(&s.durable)
	require.NoError(f.t, s.Load(f.ctx))
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	stop = func() { cancel(); <-done }
	f.t.Cleanup(stop)
	return s, stop
}

// configMaps returns the names of the records ConfigMaps in the API.
func (f *cmFixture) configMaps() []string {
	list, err := f.kube.CoreV1().ConfigMaps(recordsNamespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	return names
}

// cmRecords decodes the infeasible store's ConfigMap of the VPA of uid; nil
// when there is none.
func (f *cmFixture) cmRecords(vpaUID types.UID) map[types.UID]*Record {
	return f.cmRecordsOf(StoreInfeasible, vpaUID)
}

// cmRecordsOf decodes store's ConfigMap of the VPA of uid; nil when there is
// none.
func (f *cmFixture) cmRecordsOf(store string, vpaUID types.UID) map[types.UID]*Record {
	cm, err := f.kube.CoreV1().ConfigMaps(recordsNamespace).Get(context.Background(), ConfigMapName(store, vpaUID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	d, err := DecodeCompact(cm.Data[ConfigMapDataKey], DecodeOptions{})
	require.NoError(f.t, err)
	return d.Records
}

// deleteVPA deletes a VPA from the API and waits until the cache has seen
// it go, as the controller does before it calls ForgetOwner.
func (f *cmFixture) deleteVPA(name string) {
	f.t.Helper()
	require.NoError(f.t, f.client.AutoscalingV1().VerticalPodAutoscalers("default").Delete(context.Background(), name, metav1.DeleteOptions{}))
	require.Eventually(f.t, func() bool {
		_, err := f.lister.VerticalPodAutoscalers("default").Get(name)
		return apierrors.IsNotFound(err)
	}, wait, tick)
}
