//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
)

// The messages of deploy/base/updater/policy/admission-policy.yaml.
const (
	policyJobsOnlySuspended = "vpa-inplace-updater may change only suspended Jobs, and may not resume them"
	policyJobsMetadata      = "vpa-inplace-updater may not change a Job's metadata"
	policyJobsResourcesOnly = "vpa-inplace-updater may change only the resources of a suspended Job's containers and init containers"
	policyVPASpec           = "vpa-inplace-updater may not change a VerticalPodAutoscaler's spec"
	policyVPAMetadata       = "vpa-inplace-updater may change only its own annotations in a VerticalPodAutoscaler's metadata"
	policyVPAAnnotations    = "vpa-inplace-updater may change only its own annotations (vpa-inplace.dev/..., not vpa-inplace.dev/paused or vpa-inplace.dev/resize-when)"
	policyVPAStatus         = "vpa-inplace-updater may change only its InPlaceResizeBlocked condition in a VerticalPodAutoscaler's status"
	policyPodMetadata       = "vpa-inplace-updater may change only the startup boost annotations in a pod's metadata"
	policyPodAdded          = "vpa-inplace-updater may not add or change a pod's annotations (it only removes startup boost annotations)"
	policyPodRemoved        = "vpa-inplace-updater may remove only a pod's startup boost annotations (vpaCpuStartupBoost/...)"
	policyConfigMapKill     = "vpa-inplace-updater may not write its kill switch (--config-map)"
	policyConfigMapName     = "vpa-inplace-updater may write only its records ConfigMaps (named with its --records-prefix) and node room buckets (never deleted)"
	policyConfigMapLabel    = "vpa-inplace-updater may write only its records ConfigMaps, labelled vpa-inplace.dev/records before and after"
)

// killSwitch is the updater's cluster-wide kill switch (--config-map), in
// its namespace.
const killSwitch = "vpa-inplace-updater-config"

// updaterClients are clients authenticated as the updater's ServiceAccount:
// from the kubeconfig the updater runs with (E2E_UPDATER_KUBECONFIG, written
// by hack/deploy/local-apply.sh), or else the cluster admin impersonating
// that ServiceAccount (E2E_UPDATER_SERVICEACCOUNT, default
// vpa-inplace-system:vpa-inplace-updater), which is what RBAC and the
// policies see either way.
func updaterClients(t *testing.T) (kubernetes.Interface, vpaclientset.Interface) {
	t.Helper()
	var config *rest.Config
	var err error
	if path := os.Getenv("E2E_UPDATER_KUBECONFIG"); path != "" {
		t.Logf("as the updater, with the token of %s", path)
		config, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		config, err = clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
		if err == nil {
			config.Impersonate = rest.ImpersonationConfig{
				UserName: "system:serviceaccount:" + env("E2E_UPDATER_SERVICEACCOUNT", "vpa-inplace-system:vpa-inplace-updater"),
			}
			t.Logf("as the updater, impersonating %s", config.Impersonate.UserName)
		}
	}
	require.NoError(t, err)
	return kubernetes.NewForConfigOrDie(config), vpaclientset.NewForConfigOrDie(config)
}

// requireRefusedByPolicy checks that err is the policy's refusal: 403 with
// its message.
func requireRefusedByPolicy(t *testing.T, err error, message, what string) {
	t.Helper()
	require.Error(t, err, "%s must be refused", what)
	assert.True(t, apierrors.IsForbidden(err), "%s: want 403 from the admission policy, got %v", what, err)
	assert.Contains(t, err.Error(), message, what)
}

// suspendedRef is the target of the test's VPA: the suspended Job.
func suspendedRef() *autoscalingv1.CrossVersionObjectReference {
	return &autoscalingv1.CrossVersionObjectReference{APIVersion: "batch/v1", Kind: "Job", Name: "suspended"}
}

func mergePatch(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestUpdaterIdentityIsNarrowedByAdmissionPolicy: with the updater's own
// token, what the updater writes (resources of a suspended Job's containers
// and init containers; its record annotations, added and removed; its
// InPlaceResizeBlocked condition; the removal of a pod's startup boost
// annotations, and its resizes through pods/resize; its records ConfigMaps)
// is accepted, and anything else on Jobs, VPAs, pods and ConfigMaps that
// RBAC would let through (the kill switch rewritten or deleted) is refused
// by the shipped ValidatingAdmissionPolicies with their message. The same
// changes by the cluster admin are accepted: the policies match the updater
// alone.
func TestUpdaterIdentityIsNarrowedByAdmissionPolicy(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := ctxFor(t)
	updKube, updVPAs := updaterClients(t)

	template := jobTemplate(t, "policy")
	template.Spec.InitContainers = []corev1.Container{{
		Name:      "init",
		Image:     "registry.invalid/init:1",
		Resources: corev1.ResourceRequirements{Requests: rl("50m", "32Mi")},
	}}
	suspended := createSuspendedJob(t, ns, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "suspended"},
		Spec:       batchv1.JobSpec{Template: template},
	})
	running, err := kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "running"},
		Spec:       batchv1.JobSpec{Template: jobTemplate(t, "policy-running"), BackoffLimit: ptr.To[int32](0)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	mode := vpatypes.UpdateModeOff
	vpa, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctx, &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "policy", Annotations: map[string]string{
			"team": "a", "vpa-inplace.dev/paused": "false",
		}},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    suspendedRef(),
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	recommend(t, ns, vpa.Name, "100m", "100Mi")

	patchVPA := func(p any, subresources ...string) error {
		_, err := updVPAs.AutoscalingV1().VerticalPodAutoscalers(ns).Patch(ctx, vpa.Name, types.MergePatchType, mergePatch(t, p), metav1.PatchOptions{}, subresources...)
		return err
	}
	patchJob := func(name string, p any) error {
		_, err := updKube.BatchV1().Jobs(ns).Patch(ctx, name, types.StrategicMergePatchType, mergePatch(t, p), metav1.PatchOptions{})
		return err
	}
	resources := func(container, cpu, mem string) map[string]any {
		return map[string]any{"name": container, "resources": map[string]any{"requests": map[string]string{"cpu": cpu, "memory": mem}}}
	}

	// The policies are applied with the cluster: wait until the API server
	// enforces them (a refused label is the sign; one that got through is
	// taken off again by the admin).
	waitFor(t, eventually, "the updater's admission policy enforced", func(ctx context.Context) (bool, error) {
		err := patchVPA(map[string]any{"metadata": map[string]any{"labels": map[string]string{"probe": "x"}}})
		if err == nil {
			_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Patch(ctx, vpa.Name, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"probe":null}}}`), metav1.PatchOptions{})
			return false, err
		}
		if !apierrors.IsForbidden(err) {
			t.Logf("a label by the updater: %v", err)
		}
		return apierrors.IsForbidden(err), nil
	})

	t.Run("jobs", func(t *testing.T) {
		// Allowed: what BuildJobPatch sends, on containers and init containers.
		require.NoError(t, patchJob(suspended.Name, map[string]any{
			"metadata": map[string]any{"resourceVersion": getJob(t, ns, suspended.Name).ResourceVersion},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{resources("app", "200m", "200Mi")},
			}}},
		}), "the resources of a suspended Job's container")
		require.NoError(t, patchJob(suspended.Name, map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"initContainers": []any{resources("init", "60m", "40Mi")},
		}}}}), "the resources of a suspended Job's init container")
		got := getJob(t, ns, suspended.Name)
		assert.Equal(t, "200m", ptr.To(got.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]).String())
		assert.Equal(t, "60m", ptr.To(got.Spec.Template.Spec.InitContainers[0].Resources.Requests[corev1.ResourceCPU]).String())

		// Refused by the policy: changes the API server itself allows.
		requireRefusedByPolicy(t, patchJob(suspended.Name, map[string]any{"spec": map[string]any{"suspend": false}}),
			policyJobsOnlySuspended, "resuming a suspended Job")
		requireRefusedByPolicy(t, patchJob(suspended.Name, map[string]any{
			"spec": map[string]any{"suspend": false, "template": map[string]any{"spec": map[string]any{"containers": []any{resources("app", "300m", "300Mi")}}}},
		}), policyJobsOnlySuspended, "resuming a suspended Job along with new resources")
		requireRefusedByPolicy(t, patchJob(suspended.Name, map[string]any{"spec": map[string]any{"parallelism": 3}}),
			policyJobsResourcesOnly, "a suspended Job's parallelism")
		requireRefusedByPolicy(t, patchJob(suspended.Name, map[string]any{"spec": map[string]any{"template": map[string]any{
			"spec": map[string]any{"nodeSelector": map[string]string{"kubernetes.io/hostname": "hollow-2"}},
		}}}), policyJobsResourcesOnly, "a suspended Job's node selector")
		requireRefusedByPolicy(t, patchJob(suspended.Name, map[string]any{"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]string{"extra": "x"}},
		}}}), policyJobsResourcesOnly, "a suspended Job's pod template labels")
		requireRefusedByPolicy(t, patchJob(suspended.Name, map[string]any{"metadata": map[string]any{"labels": map[string]string{"extra": "x"}}}),
			policyJobsMetadata, "a suspended Job's labels")
		requireRefusedByPolicy(t, patchJob(running.Name, map[string]any{"spec": map[string]any{"parallelism": 2}}),
			policyJobsOnlySuspended, "a running Job's parallelism")
		requireRefusedByPolicy(t, patchJob(running.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]string{"extra": "x"}}}),
			policyJobsOnlySuspended, "a running Job's annotations")

		// Refused before the policy, by the API server's own validation of
		// Jobs (the template of a running Job, and all but resources in a
		// suspended Job's containers, are immutable): refused all the same.
		err := patchJob(suspended.Name, map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "registry.invalid/other:1"}},
		}}}})
		assert.True(t, isForbiddenOrInvalid(err), "a suspended Job's image: %v", err)
		err = patchJob(running.Name, map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{resources("app", "300m", "300Mi")},
		}}}})
		assert.True(t, isForbiddenOrInvalid(err), "a running Job's resources: %v", err)

		got = getJob(t, ns, suspended.Name)
		assert.True(t, ptr.Deref(got.Spec.Suspend, false), "still suspended")
		assert.Equal(t, int32(1), ptr.Deref(got.Spec.Parallelism, 1), "parallelism unchanged")
		assert.Equal(t, template.Spec.NodeSelector, got.Spec.Template.Spec.NodeSelector, "node selector unchanged")
		assert.Empty(t, got.Labels["extra"], "labels unchanged")
		assert.Equal(t, "registry.invalid/app:1", got.Spec.Template.Spec.Containers[0].Image)

		// The admin is not matched.
		_, err = kube.BatchV1().Jobs(ns).Patch(ctx, suspended.Name, types.StrategicMergePatchType,
			[]byte(`{"metadata":{"labels":{"extra":"x"}}}`), metav1.PatchOptions{})
		require.NoError(t, err, "the admin labels a Job")
	})

	t.Run("vpas", func(t *testing.T) {
		uid := string(vpa.UID)
		annotate := func(key string, value any) map[string]any {
			return map[string]any{"metadata": map[string]any{"uid": uid, "annotations": map[string]any{key: value}}}
		}
		// Allowed: the records' annotations, written and removed as
		// pkg/records does (merge patch with a UID precondition).
		for _, key := range []string{"vpa-inplace.dev/infeasible-attempts", "vpa-inplace.dev/memory-limit-holds"} {
			require.NoError(t, patchVPA(annotate(key, `{"version":1}`)), "writing %s", key)
			require.NoError(t, patchVPA(annotate(key, nil)), "removing %s", key)
		}
		// Allowed: the InPlaceResizeBlocked condition, next to the others.
		current, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, vpa.Name, metav1.GetOptions{})
		require.NoError(t, err)
		conditions := append(current.Status.Conditions, vpatypes.VerticalPodAutoscalerCondition{
			Type: "InPlaceResizeBlocked", Status: corev1.ConditionFalse, Reason: "AllResized", LastTransitionTime: metav1.Now(),
		})
		require.NoError(t, patchVPA(map[string]any{
			"metadata": map[string]any{"resourceVersion": current.ResourceVersion},
			"status":   map[string]any{"conditions": conditions},
		}, "status"), "the InPlaceResizeBlocked condition")

		// Refused by the policy.
		requireRefusedByPolicy(t, patchVPA(map[string]any{"spec": map[string]any{"updatePolicy": map[string]any{"updateMode": "Recreate"}}}),
			policyVPASpec, "a VPA's updateMode")
		requireRefusedByPolicy(t, patchVPA(annotate("team", "b")), policyVPAAnnotations, "a foreign annotation")
		requireRefusedByPolicy(t, patchVPA(annotate("team", nil)), policyVPAAnnotations, "removing a foreign annotation")
		requireRefusedByPolicy(t, patchVPA(annotate("vpa-inplace.dev/paused", "true")), policyVPAAnnotations, "the user's vpa-inplace.dev/paused")
		requireRefusedByPolicy(t, patchVPA(map[string]any{"metadata": map[string]any{"labels": map[string]string{"extra": "x"}}}),
			policyVPAMetadata, "a VPA's labels")
		requireRefusedByPolicy(t, patchVPA(map[string]any{"status": map[string]any{"recommendation": map[string]any{
			"containerRecommendations": []any{map[string]any{"containerName": "app", "target": map[string]string{"cpu": "4", "memory": "4Gi"}}},
		}}}, "status"), policyVPAStatus, "a VPA's recommendation")
		others := []vpatypes.VerticalPodAutoscalerCondition{{
			Type: vpatypes.RecommendationProvided, Status: corev1.ConditionFalse, Reason: "Forged", LastTransitionTime: metav1.Now(),
		}}
		requireRefusedByPolicy(t, patchVPA(map[string]any{"status": map[string]any{"conditions": others}}, "status"),
			policyVPAStatus, "another condition of a VPA")
		// No create (RBAC grants none; the policy refuses it too).
		_, err = updVPAs.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctx, &vpatypes.VerticalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "created"},
			Spec:       vpatypes.VerticalPodAutoscalerSpec{TargetRef: suspendedRef()},
		}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "creating a VPA: %v", err)

		got, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, vpa.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, vpatypes.UpdateModeOff, *got.Spec.UpdatePolicy.UpdateMode)
		assert.Equal(t, map[string]string{"team": "a", "vpa-inplace.dev/paused": "false"}, got.Annotations)
		assert.Equal(t, "100m", ptr.To(got.Status.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceCPU]).String())
		var seen []string
		for _, c := range got.Status.Conditions {
			seen = append(seen, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
		assert.Equal(t, []string{"InPlaceResizeBlocked=False"}, seen, "only the updater's condition was written")

		// The admin is not matched.
		_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Patch(ctx, vpa.Name, types.MergePatchType, mergePatch(t, annotate("team", "b")), metav1.PatchOptions{})
		require.NoError(t, err, "the admin annotates a VPA")
	})

	t.Run("pods", func(t *testing.T) {
		boost := func(container string) string { return "vpaCpuStartupBoost/" + container }
		original := `{"requests":{"cpu":"100m"},"limits":{}}`
		created, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   "boosted",
				Labels: map[string]string{"app": "policy-pod"},
				Annotations: map[string]string{
					"team": "a", boost("app"): original, boost("sidecar"): original,
				},
			},
			Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"kubernetes.io/hostname": nodeFor(t)},
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{
					{Name: "app", Image: "registry.invalid/app:1", Resources: corev1.ResourceRequirements{Requests: rl("200m", "100Mi")}},
					{Name: "sidecar", Image: "registry.invalid/app:1", Resources: corev1.ResourceRequirements{Requests: rl("200m", "50Mi")}},
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		uid := string(created.UID)
		patchPod := func(p any) error {
			_, err := updKube.CoreV1().Pods(ns).Patch(ctx, created.Name, types.MergePatchType, mergePatch(t, p), metav1.PatchOptions{})
			return err
		}
		annotate := func(annotations map[string]any) map[string]any {
			return map[string]any{"metadata": map[string]any{"uid": uid, "annotations": annotations}}
		}
		// The pods policy may be enforced a moment after the others.
		waitFor(t, eventually, "the updater's pods policy enforced", func(ctx context.Context) (bool, error) {
			err := patchPod(map[string]any{"metadata": map[string]any{"labels": map[string]string{"probe": "x"}}})
			if err == nil {
				_, err := kube.CoreV1().Pods(ns).Patch(ctx, created.Name, types.MergePatchType,
					[]byte(`{"metadata":{"labels":{"probe":null}}}`), metav1.PatchOptions{})
				return false, err
			}
			if !apierrors.IsForbidden(err) {
				t.Logf("a label by the updater: %v", err)
			}
			return apierrors.IsForbidden(err), nil
		})

		// Refused by the policy: RBAC lets the updater patch any pod.
		requireRefusedByPolicy(t, patchPod(annotate(map[string]any{boost("other"): original})),
			policyPodAdded, "adding a boost annotation")
		requireRefusedByPolicy(t, patchPod(annotate(map[string]any{boost("app"): `{"requests":{"cpu":"4"},"limits":{}}`})),
			policyPodAdded, "changing a boost annotation")
		requireRefusedByPolicy(t, patchPod(annotate(map[string]any{"team": nil})),
			policyPodRemoved, "removing another annotation")
		requireRefusedByPolicy(t, patchPod(annotate(map[string]any{"team": nil, boost("app"): nil})),
			policyPodRemoved, "removing another annotation along with a boost one")
		requireRefusedByPolicy(t, patchPod(map[string]any{"metadata": map[string]any{"labels": map[string]string{"app": "other"}}}),
			policyPodMetadata, "changing a pod's label")
		got := getPod(t, ns, created.Name)
		assert.Equal(t, created.Annotations, got.Annotations, "annotations unchanged")
		assert.Equal(t, created.Labels, got.Labels, "labels unchanged")

		// Allowed: what the end of a boost sends (a merge patch with the
		// pod's UID), one annotation, then the rest.
		require.NoError(t, patchPod(annotate(map[string]any{boost("app"): nil})), "removing a boost annotation")
		assert.Equal(t, map[string]string{"team": "a", boost("sidecar"): original}, getPod(t, ns, created.Name).Annotations)
		require.NoError(t, patchPod(annotate(map[string]any{boost("sidecar"): nil})), "removing the last boost annotation")
		assert.Equal(t, map[string]string{"team": "a"}, getPod(t, ns, created.Name).Annotations)

		// The updater's resizes go through pods/resize, which the pods
		// policy does not match (it refuses any change of the spec).
		waitFor(t, eventually, "pod "+created.Name+" running", func(context.Context) (bool, error) {
			return getPod(t, ns, created.Name).Status.Phase == corev1.PodRunning, nil
		})
		_, err = updKube.CoreV1().Pods(ns).Patch(ctx, created.Name, types.StrategicMergePatchType,
			mergePatch(t, map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "app", "resources": map[string]any{"requests": map[string]string{"cpu": "100m"}}},
			}}}), metav1.PatchOptions{}, "resize")
		require.NoError(t, err, "a resize through pods/resize by the updater")
		assert.Equal(t, "100m", ptr.To(getPod(t, ns, created.Name).Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]).String())

		// No delete (RBAC grants none; the policy refuses it too).
		err = updKube.CoreV1().Pods(ns).Delete(ctx, created.Name, metav1.DeleteOptions{})
		assert.True(t, apierrors.IsForbidden(err), "deleting a pod: %v", err)

		// The admin is not matched.
		_, err = kube.CoreV1().Pods(ns).Patch(ctx, created.Name, types.MergePatchType,
			mergePatch(t, annotate(map[string]any{boost("app"): original})), metav1.PatchOptions{})
		require.NoError(t, err, "the admin adds a boost annotation")
	})
	t.Run("configmaps", func(t *testing.T) {
		cms := kube.CoreV1().ConfigMaps(recordsNamespace)
		updCMs := updKube.CoreV1().ConfigMaps(recordsNamespace)
		// The kill switch, as the admin left it (created here, not paused,
		// when there is none); put back as it was whatever happens.
		before, err := cms.Get(ctx, killSwitch, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			before, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: killSwitch, Namespace: recordsNamespace},
				Data:       map[string]string{"paused": "false"},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = kube.CoreV1().ConfigMaps(recordsNamespace).Delete(context.Background(), killSwitch, metav1.DeleteOptions{})
			})
		} else {
			require.NoError(t, err)
			t.Cleanup(func() {
				restore := before.DeepCopy()
				restore.ResourceVersion = ""
				cmsNow := kube.CoreV1().ConfigMaps(recordsNamespace)
				if cur, err := cmsNow.Get(context.Background(), killSwitch, metav1.GetOptions{}); err == nil {
					restore.ResourceVersion = cur.ResourceVersion
					_, _ = cmsNow.Update(context.Background(), restore, metav1.UpdateOptions{})
				} else if apierrors.IsNotFound(err) {
					_, _ = cmsNow.Create(context.Background(), restore, metav1.CreateOptions{})
				}
			})
		}
		probe := func(value any) []byte {
			return mergePatch(t, map[string]any{"data": map[string]any{"probe": value}})
		}
		// RBAC grants update, not patch: the updater's writes are updates.
		updateKillSwitch := func(edit func(*corev1.ConfigMap)) error {
			cur, err := cms.Get(ctx, killSwitch, metav1.GetOptions{})
			if err != nil {
				return err
			}
			edit(cur)
			_, err = updCMs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
		// The ConfigMaps policy may be enforced a moment after the others.
		waitFor(t, eventually, "the updater's ConfigMaps policy enforced", func(ctx context.Context) (bool, error) {
			err := updateKillSwitch(func(cm *corev1.ConfigMap) {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data["probe"] = "x"
			})
			if err == nil {
				_, err := cms.Patch(ctx, killSwitch, types.MergePatchType, probe(nil), metav1.PatchOptions{})
				return false, err
			}
			if !apierrors.IsForbidden(err) {
				t.Logf("the kill switch, by the updater: %v", err)
			}
			return apierrors.IsForbidden(err), nil
		})

		// Refused by the policy: RBAC lets the updater write every
		// ConfigMap of its namespace.
		requireRefusedByPolicy(t, updateKillSwitch(func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"paused": "false"} }),
			policyConfigMapKill, "rewriting the kill switch")
		requireRefusedByPolicy(t, updateKillSwitch(func(cm *corev1.ConfigMap) {
			cm.Labels = map[string]string{"vpa-inplace.dev/records": "infeasible"}
		}), policyConfigMapKill, "labelling the kill switch as records")
		requireRefusedByPolicy(t, updCMs.Delete(ctx, killSwitch, metav1.DeleteOptions{}), policyConfigMapKill, "deleting the kill switch")
		_, err = updCMs.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "vpa-inplace-e2e-other", Namespace: recordsNamespace},
		}, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() {
				_ = kube.CoreV1().ConfigMaps(recordsNamespace).Delete(context.Background(), "vpa-inplace-e2e-other", metav1.DeleteOptions{})
			})
		}
		requireRefusedByPolicy(t, err, policyConfigMapName, "creating another ConfigMap")
		after, err := cms.Get(ctx, killSwitch, metav1.GetOptions{})
		require.NoError(t, err, "the kill switch is still there")
		assert.Equal(t, before.Data, after.Data, "the kill switch is unchanged")
		assert.Equal(t, before.Labels, after.Labels)

		// Allowed: a records ConfigMap, as pkg/records writes it (a store
		// the running updater does not load), created, rewritten with a
		// label more, deleted.
		name := "vpa-inplace-records-e2e-" + string(vpa.UID)
		records := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: recordsNamespace, Labels: map[string]string{
				"vpa-inplace.dev/records": "e2e", "app.kubernetes.io/managed-by": "vpa-inplace-updater",
			}},
			Data: map[string]string{"records": ""},
		}
		unlabelled := records.DeepCopy()
		unlabelled.Labels = nil
		_, err = updCMs.Create(ctx, unlabelled, metav1.CreateOptions{})
		requireRefusedByPolicy(t, err, policyConfigMapLabel, "a records ConfigMap without its label")
		created, err := updCMs.Create(ctx, records, metav1.CreateOptions{})
		require.NoError(t, err, "creating a records ConfigMap")
		t.Cleanup(func() {
			_ = kube.CoreV1().ConfigMaps(recordsNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		created.Data["records"] = "x"
		created.Labels["vpa-inplace.dev/vpa-uid"] = string(vpa.UID)
		updated, err := updCMs.Update(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err, "rewriting a records ConfigMap, with a label more")
		updated.Labels = nil
		_, err = updCMs.Update(ctx, updated, metav1.UpdateOptions{})
		requireRefusedByPolicy(t, err, policyConfigMapLabel, "a records ConfigMap losing its label")
		require.NoError(t, updCMs.Delete(ctx, name, metav1.DeleteOptions{}), "deleting a records ConfigMap")

		// A ConfigMap of a records name that is not labelled as records
		// (made by someone else) cannot be made one by the updater: the
		// label is read before the update too.
		foreign := unlabelled.DeepCopy()
		foreign.Name = name + "-foreign"
		foreign, err = cms.Create(ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err, "the admin creates a ConfigMap of a records name, unlabelled")
		t.Cleanup(func() {
			_ = kube.CoreV1().ConfigMaps(recordsNamespace).Delete(context.Background(), foreign.Name, metav1.DeleteOptions{})
		})
		foreign.Labels = map[string]string{"vpa-inplace.dev/records": "e2e"}
		foreign.Data = map[string]string{"records": "x"}
		_, err = updCMs.Update(ctx, foreign, metav1.UpdateOptions{})
		requireRefusedByPolicy(t, err, policyConfigMapLabel, "labelling a ConfigMap of a records name as records")

		// The admin is not matched.
		_, err = cms.Patch(ctx, killSwitch, types.MergePatchType, probe("x"), metav1.PatchOptions{})
		require.NoError(t, err, "the admin edits the kill switch")
		_, err = cms.Patch(ctx, killSwitch, types.MergePatchType, probe(nil), metav1.PatchOptions{})
		require.NoError(t, err)
	})
}
