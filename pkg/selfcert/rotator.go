package selfcert

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// maxWrites bounds the writes of one sync: a create or replace, a stage, a
// promote and a trim at most, plus conflicts with other replicas.
const maxWrites = 8

// rotator brings the Secret to what Decide asks. Every write is
// conditional: Create fails when the Secret exists, Update carries the
// resourceVersion that was read. A lost race is answered by reading the
// Secret again and deciding anew, so replicas that act at once adopt the
// winner's content instead of writing their own over it.
type rotator struct {
	client   kubernetes.Interface
	ns, name string
	hosts    []string
	// since is when this replica started with hosts (Hosts.Since).
	since    time.Time
	validity time.Duration
	timing   Timing
	clock    clock.PassiveClock

	mu sync.Mutex
	// last is the last usable state seen, written back if the Secret is
	// deleted: replicas keep serving it, so it is still trusted.
	last *State
	// kept is the serial of the last certificate served for other hosts
	// that was kept (logged once).
	kept string
}

// sync reads the Secret, writes what it needs, and returns the state to
// serve with how long until it may need something again. published tells
// whether every named webhook configuration carries a bundle.
func (r *rotator) sync(ctx context.Context, published func(bundle []byte) bool) (*State, time.Duration, error) {
	logger := klog.FromContext(ctx)
	secrets := r.client.CoreV1().Secrets(r.ns)
	for writes := 0; writes < maxWrites; {
		secret, err := secrets.Get(ctx, r.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			secret = nil
		case err != nil:
			return nil, 0, fmt.Errorf("reading Secret %s/%s: %w", r.ns, r.name, err)
		}
		var st *State
		if secret != nil {
			var perr error
			if st, perr = parseState(secret.Data, secret.Annotations); perr != nil {
				if !ours(secret) {
					return nil, 0, fmt.Errorf("the Secret %s/%s is not usable (%w) and has neither the label %s=%s nor the annotation %s=%s: it is not overwritten",
						r.ns, r.name, perr, LabelManagedBy, ManagedBy, AnnotationWrittenBy, ManagedBy)
				}
				logger.Info("Replacing an unusable certificate Secret", "secret", klog.KObj(secret), "err", perr)
			}
		}
		// Apply actions until none is needed or a write loses a race.
		for ; writes < maxWrites; writes++ {
			now := r.clock.Now()
			want := Hosts{Names: r.hosts, Since: r.since}
			action, wait := Decide(now, st, secret != nil, st != nil && published(st.Bundle()), want, r.timing)
			if action == ActionNone {
				r.remember(st)
				r.logKept(ctx, st)
				return st, wait, nil
			}
			next, err := r.plan(action, st, now, secret != nil && len(secret.Data) == 0)
			if err != nil {
				return nil, 0, err
			}
			written, err := r.write(ctx, secret, next)
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				logger.V(2).Info("Certificate Secret changed meanwhile, reading it again", "action", action)
				writes++
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("%s of Secret %s/%s: %w", action, r.ns, r.name, err)
			}
			logger.Info("Wrote the certificate Secret", "action", action, "secret", klog.KObj(written),
				"notAfter", next.NotAfter(), "cas", len(next.cas), "staged", next.Staged())
			secret, st = written, next
		}
	}
	return nil, 0, fmt.Errorf("the Secret %s/%s: more than %d writes in one sync", r.ns, r.name, maxWrites)
}

// plan returns the state that action makes of st. empty tells that the
// Secret exists and holds nothing: the manifests' copy, applied again after
// it was deleted, is filled like a Secret created.
func (r *rotator) plan(action Action, st *State, now time.Time, empty bool) (*State, error) {
	switch action {
	case ActionCreate:
		return r.writeBack(now)
	case ActionReplace:
		if empty {
			return r.writeBack(now)
		}
		return r.fresh(now)
	case ActionStage:
		g, err := generate(now, r.hosts, r.validity)
		if err != nil {
			return nil, err
		}
		return st.withNext(g, now)
	case ActionRestage:
		g, err := generate(now, r.hosts, r.validity)
		if err != nil {
			return nil, err
		}
		return st.restaged(g, now)
	case ActionPromote:
		return st.promoted(), nil
	case ActionTrim:
		return st.trimmed(now), nil
	}
	return nil, fmt.Errorf("unknown action %q", action)
}

// writeBack returns the state last served, still valid, which the API
// server trusts already; a fresh generation if there is none.
func (r *rotator) writeBack(now time.Time) (*State, error) {
	if last := r.remembered(); last != nil && now.Before(last.NotAfter()) {
		return last, nil
	}
	return r.fresh(now)
}

func (r *rotator) fresh(now time.Time) (*State, error) {
	g, err := generate(now, r.hosts, r.validity)
	if err != nil {
		return nil, err
	}
	return stateOf(g)
}

// write creates the Secret (current nil) or updates current with the
// resourceVersion it was read with.
func (r *rotator) write(ctx context.Context, current *corev1.Secret, st *State) (*corev1.Secret, error) {
	secrets := r.client.CoreV1().Secrets(r.ns)
	if current == nil {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns}}
		st.apply(secret)
		created, err := secrets.Create(ctx, secret, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			// The manifests ship the Secret and grant no create.
			return nil, fmt.Errorf("the Secret does not exist and may not be created (apply the manifests again, which ship it empty): %w", err)
		}
		return created, err
	}
	secret := current.DeepCopy()
	if secret.ResourceVersion == "" {
		return nil, errors.New("the Secret read has no resourceVersion")
	}
	st.apply(secret)
	return secrets.Update(ctx, secret, metav1.UpdateOptions{})
}

// logKept says, once per certificate, that the certificate served (or
// staged to be) names other hosts than this replica's and is kept: a
// replica started later made it.
func (r *rotator) logKept(ctx context.Context, st *State) {
	p := &st.current
	if st.next != nil {
		p = st.next
	}
	leaf := p.leaf()
	if names(leaf.DNSNames, leaf.IPAddresses, r.hosts) {
		return
	}
	serial := leaf.SerialNumber.String()
	r.mu.Lock()
	logged := r.kept == serial
	r.kept = serial
	r.mu.Unlock()
	if !logged {
		klog.FromContext(ctx).Info("Serving a certificate made for other hosts than --cert-hosts by a replica started later; keeping it",
			"serial", serial, "dnsNames", leaf.DNSNames, "ipAddresses", leaf.IPAddresses, "certHosts", r.hosts)
	}
}

func (r *rotator) remember(st *State) {
	if st == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = st
}

func (r *rotator) remembered() *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
