package selfcert

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

const (
	testNS     = "vpa-inplace-system"
	testSecret = "vpa-inplace-admission-certs"
)

var secretsGVR = corev1.SchemeGroupVersion.WithResource("secrets")

// versionedSecrets makes the fake clientset's Secrets behave like the API
// server where it matters here: each write bumps resourceVersion, an update
// with another resourceVersion is a conflict, a create of an existing name
// fails. Each write is atomic. Writes are counted.
type versionedSecrets struct {
	mu               sync.Mutex
	rv               int
	creates, updates atomic.Int32

	// barrier: when armed, the next n Gets wait until all n have read, so
	// that every reader acts on the same version.
	bmu     sync.Mutex
	waiting int
	release chan struct{}
}

func newVersionedClient(t *testing.T) (*fake.Clientset, *versionedSecrets) {
	client := fake.NewClientset()
	v := &versionedSecrets{}
	tracker := client.Tracker()
	client.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		v.mu.Lock()
		defer v.mu.Unlock()
		obj := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret).DeepCopy()
		if _, err := tracker.Get(secretsGVR, obj.Namespace, obj.Name); err == nil {
			return true, nil, apierrors.NewAlreadyExists(secretsGVR.GroupResource(), obj.Name)
		}
		v.rv++
		obj.ResourceVersion = strconv.Itoa(v.rv)
		if err := tracker.Create(secretsGVR, obj, obj.Namespace); err != nil {
			return true, nil, err
		}
		v.creates.Add(1)
		return true, obj.DeepCopy(), nil
	})
	client.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		v.mu.Lock()
		defer v.mu.Unlock()
		obj := a.(k8stesting.UpdateAction).GetObject().(*corev1.Secret).DeepCopy()
		stored, err := tracker.Get(secretsGVR, obj.Namespace, obj.Name)
		if err != nil {
			return true, nil, err
		}
		if stored.(*corev1.Secret).ResourceVersion != obj.ResourceVersion {
			return true, nil, apierrors.NewConflict(secretsGVR.GroupResource(), obj.Name, assert.AnError)
		}
		v.rv++
		obj.ResourceVersion = strconv.Itoa(v.rv)
		if err := tracker.Update(secretsGVR, obj, obj.Namespace); err != nil {
			return true, nil, err
		}
		v.updates.Add(1)
		return true, obj.DeepCopy(), nil
	})
	return client, v
}

// wait blocks the caller of an armed barrier until all n have read.
func (v *versionedSecrets) wait() {
	v.bmu.Lock()
	if v.waiting == 0 {
		v.bmu.Unlock()
		return
	}
	v.waiting--
	release := v.release
	if v.waiting == 0 {
		close(release)
	}
	v.bmu.Unlock()
	<-release
}

// barrierClient holds every Secret Get, once it has read, at the barrier
// of versionedSecrets. (The fake clientset runs its reactors under one lock,
// so the barrier cannot be a reactor.)
type barrierClient struct {
	*fake.Clientset
	v *versionedSecrets
}

func (c barrierClient) CoreV1() corev1client.CoreV1Interface {
	return barrierCore{CoreV1Interface: c.Clientset.CoreV1(), v: c.v}
}

type barrierCore struct {
	corev1client.CoreV1Interface
	v *versionedSecrets
}

func (c barrierCore) Secrets(ns string) corev1client.SecretInterface {
	return barrierSecrets{SecretInterface: c.CoreV1Interface.Secrets(ns), v: c.v}
}

type barrierSecrets struct {
	corev1client.SecretInterface
	v *versionedSecrets
}

func (s barrierSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	secret, err := s.SecretInterface.Get(ctx, name, opts)
	s.v.wait()
	return secret, err
}

func (v *versionedSecrets) arm(n int) {
	v.bmu.Lock()
	defer v.bmu.Unlock()
	v.waiting, v.release = n, make(chan struct{})
}

func newRotator(client *fake.Clientset, v *versionedSecrets, clk *testingclock.FakeClock) *rotator {
	return &rotator{client: barrierClient{Clientset: client, v: v}, ns: testNS, name: testSecret, hosts: hosts, since: clk.Now(), validity: validity, timing: timing, clock: clk}
}

// syncAll runs one sync of every rotator at once, all reading the same
// version of the Secret first, and returns their states.
func syncAll(t *testing.T, v *versionedSecrets, rotators []*rotator, published bool) []*State {
	t.Helper()
	v.arm(len(rotators))
	states := make([]*State, len(rotators))
	errs := make([]error, len(rotators))
	var wg sync.WaitGroup
	for i, r := range rotators {
		wg.Go(func() {
			states[i], _, errs[i] = r.sync(context.Background(), func([]byte) bool { return published })
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "rotator %d", i)
	}
	return states
}

func stored(t *testing.T, client *fake.Clientset) *State {
	t.Helper()
	secret, err := client.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metav1.GetOptions{})
	require.NoError(t, err)
	st, err := parseState(secret.Data, secret.Annotations)
	require.NoError(t, err)
	return st
}

func requireAllAgree(t *testing.T, states []*State, want *State) {
	t.Helper()
	for i, st := range states {
		require.Equal(t, string(want.Bundle()), string(st.Bundle()), "rotator %d holds another bundle than the Secret", i)
		require.Equal(t, want.current.certPEM, st.current.certPEM, "rotator %d serves another certificate than the Secret", i)
	}
}

// Many replicas starting together, then rotating together, end with one CA
// and one served pair: every write but one loses its race and adopts the
// winner's Secret.
func TestConcurrentRotatorsEndWithOneCA(t *testing.T) {
	const replicas = 32
	client, v := newVersionedClient(t)
	clk := testingclock.NewFakeClock(t0)
	rotators := make([]*rotator, replicas)
	for i := range rotators {
		rotators[i] = newRotator(client, v, clk)
	}

	// Start: all see no Secret, all try to create it.
	states := syncAll(t, v, rotators, true)
	first := stored(t, client)
	assert.Equal(t, int32(1), v.creates.Load(), "one create wins")
	assert.Equal(t, int32(0), v.updates.Load(), "nobody overwrites the winner")
	require.Len(t, first.cas, 1)
	requireAllAgree(t, states, first)

	// Due: all try to stage a new CA.
	clk.SetTime(t0.Add(validity - timing.RotateBefore))
	states = syncAll(t, v, rotators, false)
	staged := stored(t, client)
	assert.Equal(t, int32(1), v.updates.Load(), "one stage wins")
	require.Len(t, staged.cas, 2, "the bundle holds the old and one new CA")
	require.True(t, staged.Staged())
	assert.Equal(t, first.current.certPEM, staged.current.certPEM, "the old pair is served until the new CA is published")
	requireAllAgree(t, states, staged)

	// Published for the publish delay: all try to promote.
	clk.Step(timing.PublishDelay)
	states = syncAll(t, v, rotators, true)
	promoted := stored(t, client)
	assert.Equal(t, int32(2), v.updates.Load(), "one promote wins")
	assert.Equal(t, staged.next.certPEM, promoted.current.certPEM)
	assert.Equal(t, staged.Bundle(), promoted.Bundle())
	requireAllAgree(t, states, promoted)
}

func TestDeletedSecretIsWrittenBackAsItWas(t *testing.T) {
	client, v := newVersionedClient(t)
	clk := testingclock.NewFakeClock(t0)
	r := newRotator(client, v, clk)
	before, _, err := r.sync(context.Background(), func([]byte) bool { return true })
	require.NoError(t, err)

	require.NoError(t, client.CoreV1().Secrets(testNS).Delete(context.Background(), testSecret, metav1.DeleteOptions{}))
	after, _, err := r.sync(context.Background(), func([]byte) bool { return true })
	require.NoError(t, err)
	assert.Equal(t, before.Bundle(), after.Bundle(), "the CA served and published is written back, not a new one")
	assert.Equal(t, before.current.certPEM, stored(t, client).current.certPEM)
}

// The manifests ship the Secret and grant no create: a Secret deleted by
// hand comes back empty when they are applied again, and is filled with
// the CA in use, not a new one.
func TestReappliedEmptySecretIsWrittenBackAsItWas(t *testing.T) {
	client, v := newVersionedClient(t)
	clk := testingclock.NewFakeClock(t0)
	r := newRotator(client, v, clk)
	before, _, err := r.sync(context.Background(), func([]byte) bool { return true })
	require.NoError(t, err)

	require.NoError(t, client.CoreV1().Secrets(testNS).Delete(context.Background(), testSecret, metav1.DeleteOptions{}))
	_, err = client.CoreV1().Secrets(testNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNS, Labels: map[string]string{LabelManagedBy: "Helm"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	after, _, err := r.sync(context.Background(), func([]byte) bool { return true })
	require.NoError(t, err)
	assert.Equal(t, before.Bundle(), after.Bundle(), "the CA served and published is written back, not a new one")
	assert.Equal(t, before.current.certPEM, stored(t, client).current.certPEM)
}

func TestUnusableSecret(t *testing.T) {
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		replaced bool
	}{
		{name: "ours: replaced", labels: map[string]string{LabelManagedBy: ManagedBy}, replaced: true},
		{name: "not ours: left alone", labels: map[string]string{LabelManagedBy: "cert-manager"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, v := newVersionedClient(t)
			_, err := client.CoreV1().Secrets(testNS).Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNS, Labels: tc.labels},
				Data:       map[string][]byte{KeyCert: []byte("not a certificate")},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			_, _, err = newRotator(client, v, testingclock.NewFakeClock(t0)).sync(context.Background(), func([]byte) bool { return true })
			if !tc.replaced {
				require.ErrorContains(t, err, "not overwritten")
				secret, err := client.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, "not a certificate", string(secret.Data[KeyCert]))
				return
			}
			require.NoError(t, err)
			assert.Len(t, stored(t, client).cas, 1)
		})
	}
}

// otherHosts is what --cert-hosts says after a change: the Service was
// renamed, 127.0.0.1 is still there.
var otherHosts = []string{"vpa-inplace-admission.vpa-inplace-system.svc", "127.0.0.1"}

// servedNames returns the DNS names and IP addresses of the served
// certificate, sorted.
func servedNames(st *State) []string {
	leaf := st.current.leaf()
	out := append([]string{}, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// A replica started with other hosts than the served certificate names
// replaces it through a rotation (stage, publish, promote) at once, not
// at the next rotation 60 days later. A replica still running with the old
// hosts (a rolling update) keeps serving what the newer one wrote: it does
// not rotate back.
func TestChangedHostsAreServedAfterOneRotation(t *testing.T) {
	ctx := context.Background()
	client, v := newVersionedClient(t)
	clk := testingclock.NewFakeClock(t0)
	old := newRotator(client, v, clk)
	before, _, err := old.sync(ctx, func([]byte) bool { return true })
	require.NoError(t, err)
	require.Equal(t, sorted(hosts), servedNames(before))

	clk.Step(time.Minute)
	renamed := newRotator(client, v, clk)
	renamed.hosts = otherHosts
	st, wait, err := renamed.sync(ctx, func([]byte) bool { return true })
	require.NoError(t, err)
	require.True(t, st.Staged(), "a certificate for other hosts is replaced at once, through a rotation")
	assert.Equal(t, before.current.certPEM, st.current.certPEM, "the old pair is served until the new CA is published")
	assert.Equal(t, timing.PublishDelay, wait)

	clk.Step(timing.PublishDelay)
	st, _, err = renamed.sync(ctx, func([]byte) bool { return true })
	require.NoError(t, err)
	assert.Equal(t, sorted(otherHosts), servedNames(st))
	assert.Equal(t, sorted(otherHosts), servedNames(stored(t, client)))

	updates := v.updates.Load()
	st, _, err = old.sync(ctx, func([]byte) bool { return true })
	require.NoError(t, err)
	assert.Equal(t, sorted(otherHosts), servedNames(st), "the older replica serves what the newer one wrote")
	assert.Equal(t, updates, v.updates.Load(), "the older replica does not rotate back to its hosts")

	st, _, err = renamed.sync(ctx, func([]byte) bool { return true })
	require.NoError(t, err)
	assert.Equal(t, updates, v.updates.Load(), "a certificate that names the hosts is kept")
	assert.False(t, st.Staged())
}

// A pair staged for the old hosts before the replica started is replaced
// by one for its hosts; the old staged pair's CA, which signed nothing ever
// served, leaves the bundle.
func TestStaleStagedPairIsRestaged(t *testing.T) {
	ctx := context.Background()
	client, v := newVersionedClient(t)
	clk := testingclock.NewFakeClock(t0)
	old := newRotator(client, v, clk)
	_, _, err := old.sync(ctx, func([]byte) bool { return true })
	require.NoError(t, err)
	clk.SetTime(t0.Add(validity - timing.RotateBefore))
	staged, _, err := old.sync(ctx, func([]byte) bool { return false })
	require.NoError(t, err)
	require.True(t, staged.Staged())
	require.Len(t, staged.cas, 2)

	clk.Step(time.Second)
	renamed := newRotator(client, v, clk)
	renamed.hosts = otherHosts
	st, _, err := renamed.sync(ctx, func([]byte) bool { return false })
	require.NoError(t, err)
	require.True(t, st.Staged())
	leaf := st.next.leaf()
	assert.ElementsMatch(t, otherHosts, append(slices.Clone(leaf.DNSNames), leaf.IPAddresses[0].String()))
	assert.Equal(t, staged.current.certPEM, st.current.certPEM, "the served pair stays until the new CA is published")
	require.Len(t, st.cas, 2, "the bundle holds the served pair's CA and the new one, not the stale staged one's")
	assert.NotContains(t, string(st.Bundle()), string(staged.cas[1].pem))
	assert.Equal(t, stored(t, client).Bundle(), st.Bundle())
}

// The manifests ship the Secret empty (type Opaque: a kubernetes.io/tls
// Secret must hold a pair) and grant get and update on it, no create. The
// chart's copy carries Helm's managed-by label, which Helm checks at every
// upgrade. The first sync fills it in place: no create, the type and the
// label kept, the annotation saying who wrote it added.
func TestShippedEmptySecretIsFilled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		labels    map[string]string
		wantLabel string
	}{
		{name: "chart (Helm's label)", labels: map[string]string{LabelManagedBy: "Helm"}, wantLabel: "Helm"},
		{name: "kustomize (no label)", wantLabel: ManagedBy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, v := newVersionedClient(t)
			_, err := client.CoreV1().Secrets(testNS).Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNS, Labels: tc.labels},
				Type:       corev1.SecretTypeOpaque,
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			var creates atomic.Int32
			client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				creates.Add(1)
				return true, nil, apierrors.NewForbidden(secretsGVR.GroupResource(), "", errors.New("RBAC: no create"))
			})
			st, _, err := newRotator(client, v, testingclock.NewFakeClock(t0)).sync(context.Background(), func([]byte) bool { return true })
			require.NoError(t, err)
			assert.Zero(t, creates.Load(), "nothing created")
			secret, err := client.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, corev1.SecretTypeOpaque, secret.Type, "the type cannot change")
			assert.Equal(t, tc.wantLabel, secret.Labels[LabelManagedBy])
			assert.Equal(t, ManagedBy, secret.Annotations[AnnotationWrittenBy])
			assert.Equal(t, st.Bundle(), stored(t, client).Bundle())
		})
	}
}

// A shipped Secret deleted by hand cannot be created again without the
// right: the error says what to do, and the sync is retried.
func TestMissingSecretNotCreatableSaysSo(t *testing.T) {
	client, v := newVersionedClient(t)
	client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(secretsGVR.GroupResource(), "", errors.New("RBAC: no create"))
	})
	_, _, err := newRotator(client, v, testingclock.NewFakeClock(t0)).sync(context.Background(), func([]byte) bool { return true })
	require.ErrorContains(t, err, "apply the manifests again")
	assert.True(t, apierrors.IsForbidden(err))
}

// A Secret written by this package that Helm's label now marks (a release
// that took over the Secret) is still replaced when not usable.
func TestUnusableSecretWrittenHereUnderHelmsLabel(t *testing.T) {
	client, v := newVersionedClient(t)
	_, err := client.CoreV1().Secrets(testNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNS, Labels: map[string]string{LabelManagedBy: "Helm"},
			Annotations: map[string]string{AnnotationWrittenBy: ManagedBy}},
		Data: map[string][]byte{KeyCert: []byte("not a certificate")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, _, err = newRotator(client, v, testingclock.NewFakeClock(t0)).sync(context.Background(), func([]byte) bool { return true })
	require.NoError(t, err)
	assert.Len(t, stored(t, client).cas, 1)
}
