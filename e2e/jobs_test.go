//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// Suspended Jobs (KEP-5440): the recommendation goes into the pod template of
// a suspended Job, so that its pods start with it on resume. The v1.37 and
// v1.35-kubelet profiles run API server 1.37 (gate
// MutablePodResourcesForSuspendedJobs on by default), the v1.34 profile
// API server 1.34 (no such gate: templates immutable); each runs
// kube-controller-manager, whose Job controller sets the Suspended
// condition.

// jobTemplatesMutable is why the tests that write a suspended Job's
// template need Kubernetes 1.36.
const jobTemplatesMutable = "a suspended Job's container resources are mutable from 1.36 by default (KEP-5440, gate MutablePodResourcesForSuspendedJobs, beta; alpha and off in 1.35); TestSuspendedJobTemplateNotSentBefore135 covers 1.34"

const (
	eventJobUpdated  = "InPlaceJobTemplateUpdated"
	eventJobRejected = "InPlaceJobTemplateRejected"
	// podUpdatesAnnotation is what the admission controller writes on a pod
	// whose resources it changed (upstream VPA's key).
	podUpdatesAnnotation = "vpaUpdates"
	metricJobWrites      = "vpa_inplace_updater_job_template_writes_total"
	metricJobDecisions   = "vpa_inplace_updater_job_template_decisions_total"
)

func jobTemplate(t *testing.T, app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": nodeFor(t)},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:      "app",
				Image:     "registry.invalid/app:1",
				Resources: corev1.ResourceRequirements{Requests: rl("100m", "100Mi")},
			}},
		},
	}
}

// createSuspendedJob creates a suspended Job and waits for the Job
// controller's Suspended condition.
func createSuspendedJob(t *testing.T, ns string, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	job.Spec.Suspend = ptr.To(true)
	job.Spec.BackoffLimit = ptr.To[int32](0)
	created, err := kube.BatchV1().Jobs(ns).Create(ctxFor(t), job, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, eventually, "the Suspended condition of Job "+job.Name, func(ctx context.Context) (bool, error) {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
				created = j
				return true, nil
			}
		}
		return false, nil
	})
	return created
}

func newTargetVPA(t *testing.T, ns, name string, ref *autoscalingv1.CrossVersionObjectReference) {
	t.Helper()
	mode := vpatypes.UpdateModeInPlace
	_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       vpatypes.VerticalPodAutoscalerSpec{TargetRef: ref, UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func getJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return j
}

// waitTemplate waits until the Job's template requests for container app
// are cpu/mem.
func waitTemplate(t *testing.T, ns, name, cpu, mem string) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	waitFor(t, eventually, fmt.Sprintf("Job %s's template at %s/%s", name, cpu, mem), func(context.Context) (bool, error) {
		j = getJob(t, ns, name)
		r := j.Spec.Template.Spec.Containers[0].Resources.Requests
		return r.Cpu().Cmp(rl(cpu, "")[corev1.ResourceCPU]) == 0 && r.Memory().Cmp(rl("", mem)[corev1.ResourceMemory]) == 0, nil
	})
	return j
}

// requireJobStable watches the Job for settle and fails if its generation
// changes (a second write).
func requireJobStable(t *testing.T, ns, name string, generation int64) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		require.Equal(t, generation, getJob(t, ns, name).Generation, "no further write of Job %s", name)
		time.Sleep(500 * time.Millisecond)
	}
}

func TestSuspendedJobStartsRightSized(t *testing.T) {
	parallel(t)
	requireServerMinor(t, 36, jobTemplatesMutable)
	ns := newNamespace(t, nil)
	created := createSuspendedJob(t, ns, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec:       batchv1.JobSpec{Template: jobTemplate(t, "train")},
	})
	newTargetVPA(t, ns, "train-vpa", &autoscalingv1.CrossVersionObjectReference{APIVersion: "batch/v1", Kind: "Job", Name: "train"})

	recommend(t, ns, "train-vpa", "250m", "200Mi")
	job := waitTemplate(t, ns, "train", "250m", "200Mi")
	assert.Equal(t, created.Generation+1, job.Generation, "exactly one write")
	assert.True(t, *job.Spec.Suspend, "the Job stays suspended")
	waitEvent(t, ns, "train", eventJobUpdated, 1)
	c := waitCondition(t, ns, "train-vpa", "NotBlocked")
	assert.Contains(t, c.Message, "1 suspended Job: 1 template up to date.")
	requireJobStable(t, ns, "train", job.Generation)

	// Resume: the pod starts with the recommendation from the template; the
	// admission controller found nothing to change (no annotation), and the
	// updater has nothing to resize (generation 1).
	_, err := kube.BatchV1().Jobs(ns).Patch(ctxFor(t), "train", types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	var pod corev1.Pod
	waitFor(t, eventually, "the Job's pod running", func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=train"})
		if err != nil || len(list.Items) != 1 {
			return false, nil
		}
		pod = list.Items[0]
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	requests := pod.Spec.Containers[0].Resources.Requests
	assert.Equal(t, "250m", requests.Cpu().String())
	assert.Equal(t, "200Mi", requests.Memory().String())
	assert.NotContains(t, pod.Annotations, podUpdatesAnnotation, "sized by the template, not by the admission controller")
	assert.Equal(t, int64(1), pod.Generation, "not resized after it started")
	requireStable(t, ns, pod.Name)
}

func TestCronJobsSuspendedJobGetsTheCronJobVPA(t *testing.T) {
	parallel(t)
	requireServerMinor(t, 36, jobTemplatesMutable)
	ns := newNamespace(t, nil)
	template := jobTemplate(t, "nightly")
	cron, err := kube.BatchV1().CronJobs(ns).Create(ctxFor(t), &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 1 1 *",
			Suspend:  ptr.To(true), // never scheduled during the test
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Suspend: ptr.To(true), BackoffLimit: ptr.To[int32](0), Template: template,
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A Job of the CronJob, as `kubectl create job --from=cronjob/nightly`
	// makes it: the CronJob is its controller.
	created := createSuspendedJob(t, ns, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-manual", OwnerReferences: []metav1.OwnerReference{
			*metav1.NewControllerRef(cron, batchv1.SchemeGroupVersion.WithKind("CronJob")),
		}},
		Spec: batchv1.JobSpec{Template: template},
	})
	newTargetVPA(t, ns, "nightly-vpa", &autoscalingv1.CrossVersionObjectReference{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly"})

	recommend(t, ns, "nightly-vpa", "300m", "300Mi")
	job := waitTemplate(t, ns, "nightly-manual", "300m", "300Mi")
	assert.Equal(t, created.Generation+1, job.Generation, "exactly one write")
	waitEvent(t, ns, "nightly-manual", eventJobUpdated, 1)
	cron, err = kube.BatchV1().CronJobs(ns).Get(ctxFor(t), "nightly", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "100m", cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(),
		"the CronJob itself is not changed")
}

// A refusal by the API server is reported once (events on the Job and the
// VPA, the condition) and not sent again, not even after a restart of the
// updater. Kubernetes 1.37 accepts the change, so a ValidatingAdmissionPolicy
// stands in for a server with the gate off: it refuses any change of a Job's
// pod template in the test's namespace, where the gate off answers 422
// "field is immutable". Both are refusals to the updater; the unit tests
// cover the 422 itself.
func TestSuspendedJobRefusalIsReportedOnce(t *testing.T) {
	requireServerMinor(t, 35, "the updater sends a template write only to API servers that may take it (1.35+, KEP-5440); TestSuspendedJobTemplateNotSentBefore135 covers older ones")
	ns := newNamespace(t, nil)
	denyJobTemplateChanges(t, ns)
	createSuspendedJob(t, ns, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec:       batchv1.JobSpec{Template: jobTemplate(t, "train")},
	})
	waitFor(t, eventually, "the policy refusing template changes", func(ctx context.Context) (bool, error) {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		j.Spec.Template.Spec.Containers[0].Resources.Requests = rl("101m", "100Mi")
		_, err = kube.BatchV1().Jobs(ns).Update(ctx, j, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "e2e: pod templates"), nil
	})
	newTargetVPA(t, ns, "train-vpa", &autoscalingv1.CrossVersionObjectReference{APIVersion: "batch/v1", Kind: "Job", Name: "train"})
	writesBefore := updaterMetric(t, metricJobWrites)

	recommend(t, ns, "train-vpa", "250m", "200Mi")
	waitEvent(t, ns, "train", eventJobRejected, 1)
	waitVPAEvent(t, ns, "train-vpa", eventJobRejected)
	c := waitCondition(t, ns, "train-vpa", "JobTemplateRejected")
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, "Job train cannot get app: requests cpu=250m memory=200Mi")
	assert.Contains(t, c.Message, "e2e: pod templates")
	assert.Contains(t, c.Message, "not retried until the recommendation or the Job changes")
	generation := getJob(t, ns, "train").Generation
	writes := updaterMetric(t, metricJobWrites)
	assert.InDelta(t, 1, writes-writesBefore, 0, "one write sent, refused")
	assert.Equal(t, "100m", getJob(t, ns, "train").Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String())

	// Resyncs every 5s: none sends it again.
	requireJobStable(t, ns, "train", generation)
	assert.InDelta(t, writes, updaterMetric(t, metricJobWrites), 0, "not sent again")
	assert.Equal(t, int32(1), eventCount(t, ns, "train", eventJobRejected), "reported once")

	script := os.Getenv("E2E_UPDATER_RESTART")
	if script == "" {
		t.Log("E2E_UPDATER_RESTART is not set: the restart part is not run")
		return
	}
	out, err := exec.CommandContext(ctxFor(t), script).CombinedOutput()
	require.NoError(t, err, "restarting the updater: %s", out)
	waitFor(t, eventually, "the Job decided against the loaded record", func(context.Context) (bool, error) {
		return updaterSeries(metricJobDecisions, `reason="RecordedAttemptSame"`) >= 1, nil
	})
	requireJobStable(t, ns, "train", generation)
	assert.Zero(t, updaterSeries(metricJobWrites, ""), "the new updater sends nothing")
	assert.Equal(t, int32(1), eventCount(t, ns, "train", eventJobRejected), "nor reports it again")
}

// denyJobTemplateChanges installs a ValidatingAdmissionPolicy (and its
// binding) refusing, in namespace ns only, any update of a Job that changes
// its pod template.
func denyJobTemplateChanges(t *testing.T, ns string) {
	t.Helper()
	name := "e2e-deny-job-template-" + ns
	invalid := metav1.StatusReasonInvalid
	_, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctxFor(t), &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.spec.template == oldObject.spec.template",
				Message:    "e2e: pod templates of Jobs are immutable in this namespace",
				Reason:     &invalid,
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctxFor(t), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// Before 1.35 a Job's pod template is immutable, suspended or not: the API
// server refuses a change of its containers' resources (422, "field is
// immutable"), whatever the values. The updater sends nothing, records it
// once per generation of the Job and reports it (events on the Job and the
// VPA, the condition JobTemplateRejected), also across resyncs.
func TestSuspendedJobTemplateNotSentBefore135(t *testing.T) {
	requireServerMinorBelow(t, 35, "suspended Jobs' templates became mutable with KEP-5440 (1.35 alpha, 1.36 beta); TestSuspendedJobStartsRightSized covers those servers")
	ns := newNamespace(t, nil)
	created := createSuspendedJob(t, ns, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec:       batchv1.JobSpec{Template: jobTemplate(t, "train")},
	})

	// The API server itself: a change of the template's resources of a
	// suspended Job (Suspended condition True, no active pod) is refused.
	j := created.DeepCopy()
	j.Spec.Template.Spec.Containers[0].Resources.Requests = rl("250m", "200Mi")
	_, err := kube.BatchV1().Jobs(ns).Update(ctxFor(t), j, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	require.Error(t, err, "a 1.34 API server refuses the template change")
	assert.True(t, apierrors.IsInvalid(err), "422 Invalid: %v", err)
	assert.Contains(t, err.Error(), "field is immutable")

	newTargetVPA(t, ns, "train-vpa", &autoscalingv1.CrossVersionObjectReference{APIVersion: "batch/v1", Kind: "Job", Name: "train"})
	writesBefore := updaterMetric(t, metricJobWrites)
	recommend(t, ns, "train-vpa", "250m", "200Mi")
	waitEvent(t, ns, "train", eventJobRejected, 1)
	waitVPAEvent(t, ns, "train-vpa", eventJobRejected)
	c := waitCondition(t, ns, "train-vpa", "JobTemplateRejected")
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, "Kubernetes 1.34 cannot change the pod template of a Job")
	assert.InDelta(t, writesBefore, updaterMetric(t, metricJobWrites), 0, "nothing sent")

	// Resyncs every 5s: nothing is sent, nothing reported again.
	requireJobStable(t, ns, "train", created.Generation)
	assert.InDelta(t, writesBefore, updaterMetric(t, metricJobWrites), 0, "still nothing sent")
	assert.Equal(t, int32(1), eventCount(t, ns, "train", eventJobRejected), "reported once")
	assert.Equal(t, "100m", getJob(t, ns, "train").Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String())
}
