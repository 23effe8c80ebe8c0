package app

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

func TestEnsureBucket(t *testing.T) {
	configMaps := schema.GroupResource{Resource: "configmaps"}
	const ns, name = "vpa-inplace-system", "vpa-inplace-updater-noderoom-3"
	owner := &metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: "vpa-inplace-updater", UID: "lease-uid"}
	for _, tc := range []struct {
		name               string
		shipped            bool
		refuseCreate       bool
		refuseGet          bool
		wantErr            string
		wantCreatedByOwner bool
	}{
		{name: "shipped: nothing to do", shipped: true, refuseCreate: true},
		{name: "missing, create allowed: created empty, owned by the records owner", wantCreatedByOwner: true},
		{name: "missing, create refused: an error at start", refuseCreate: true, wantErr: "ConfigMap vpa-inplace-system/vpa-inplace-updater-noderoom-3"},
		{name: "not readable: an error at start", refuseGet: true, wantErr: "grant get, update, list and watch on it, by name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := kubefake.NewClientset()
			if tc.shipped {
				_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			for verb, refuse := range map[string]bool{"create": tc.refuseCreate, "get": tc.refuseGet} {
				if refuse {
					kube.PrependReactor(verb, "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
						return true, nil, apierrors.NewForbidden(configMaps, name, errors.New("RBAC"))
					})
				}
			}
			err := ensureBucket(ctx, kube.CoreV1(), ns, name, owner)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				if tc.refuseCreate {
					assert.ErrorIs(t, err, errBucketMissing)
				}
				return
			}
			require.NoError(t, err)
			cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Empty(t, cm.Data)
			if tc.wantCreatedByOwner {
				assert.Equal(t, []metav1.OwnerReference{*owner}, cm.OwnerReferences)
			}
		})
	}
}
