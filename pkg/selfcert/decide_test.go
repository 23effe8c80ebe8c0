package selfcert

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	t0     = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	timing = Timing{RotateBefore: 30 * time.Minute, PublishDelay: 10 * time.Second}
	hosts  = []string{"vpa-inplace-webhook.vpa-inplace-system.svc", "127.0.0.1"}
)

const validity = time.Hour

func newState(t *testing.T, now time.Time) *State {
	t.Helper()
	return newStateFor(t, now, hosts)
}

func newStateFor(t *testing.T, now time.Time, hosts []string) *State {
	t.Helper()
	g, err := generate(now, hosts, validity)
	require.NoError(t, err)
	st, err := stateOf(g)
	require.NoError(t, err)
	return st
}

func staged(t *testing.T, st *State, now time.Time) *State {
	t.Helper()
	g, err := generate(now, hosts, validity)
	require.NoError(t, err)
	next, err := st.withNext(g, now)
	require.NoError(t, err)
	return next
}

func TestDecide(t *testing.T) {
	fresh := newState(t, t0)
	rotateAt := t0.Add(validity - timing.RotateBefore)
	stagedAt := rotateAt
	inRotation := staged(t, fresh, stagedAt)
	afterPromotion := inRotation.promoted()

	// A replica started a minute after the Secret was made, with the same
	// hosts or with others.
	same := Hosts{Names: hosts, Since: t0.Add(time.Minute)}
	renamed := Hosts{Names: otherHosts, Since: t0.Add(time.Minute)}
	for _, tc := range []struct {
		name      string
		now       time.Time
		st        *State
		exists    bool
		published bool
		hosts     *Hosts
		action    Action
		wait      time.Duration
	}{
		{name: "no Secret: create", now: t0, action: ActionCreate},
		{name: "unusable Secret: replace", now: t0, exists: true, action: ActionReplace},
		{name: "fresh pair: wait until rotate-before", now: t0, st: fresh, exists: true, published: true,
			action: ActionNone, wait: validity - timing.RotateBefore},
		{name: "a second before rotate-before: wait a second", now: rotateAt.Add(-time.Second), st: fresh, exists: true,
			action: ActionNone, wait: time.Second},
		{name: "at rotate-before: stage", now: rotateAt, st: fresh, exists: true, published: true, action: ActionStage},
		{name: "staged, caBundle not published: wait, not promote", now: stagedAt.Add(time.Minute), st: inRotation, exists: true,
			action: ActionNone, wait: timing.PublishDelay},
		{name: "staged, published but within the publish delay: wait for the rest", now: stagedAt.Add(4 * time.Second),
			st: inRotation, exists: true, published: true, action: ActionNone, wait: 6 * time.Second},
		{name: "staged, published for the publish delay: promote", now: stagedAt.Add(timing.PublishDelay),
			st: inRotation, exists: true, published: true, action: ActionPromote},
		{name: "staged, served certificate expired: promote even unpublished", now: t0.Add(validity),
			st: inRotation, exists: true, action: ActionPromote},
		{name: "promoted: the old CA is kept until it expires", now: stagedAt.Add(time.Minute), st: afterPromotion, exists: true,
			published: true, action: ActionNone, wait: t0.Add(validity).Sub(stagedAt.Add(time.Minute))},
		{name: "promoted, old CA retires before the next rotation: wake up just after it", now: t0.Add(41 * time.Minute),
			st: staged(t, fresh, t0.Add(40*time.Minute)).promoted(), exists: true, published: true,
			action: ActionNone, wait: 19*time.Minute + time.Second},
		{name: "promoted, old CA expired: trim", now: t0.Add(validity + time.Second), st: afterPromotion, exists: true,
			published: true, action: ActionTrim},

		{name: "hosts: the same names in another order: wait until rotate-before", now: t0.Add(time.Minute), st: fresh,
			exists: true, published: true, hosts: &Hosts{Names: []string{hosts[1], hosts[0], hosts[1]}, Since: t0.Add(time.Minute)},
			action: ActionNone, wait: validity - timing.RotateBefore - time.Minute},
		{name: "hosts: a DNS name in capitals is the same name", now: t0.Add(time.Minute), st: fresh, exists: true, published: true,
			hosts:  &Hosts{Names: []string{strings.ToUpper(hosts[0]), hosts[1]}, Since: t0.Add(time.Minute)},
			action: ActionNone, wait: validity - timing.RotateBefore - time.Minute},
		{name: "hosts: other names, certificate made before the replica started: stage", now: t0.Add(time.Minute), st: fresh,
			exists: true, published: true, hosts: &renamed, action: ActionStage},
		{name: "hosts: one name more: stage", now: t0.Add(time.Minute), st: fresh, exists: true, published: true,
			hosts: &Hosts{Names: append([]string{"::1"}, hosts...), Since: t0.Add(time.Minute)}, action: ActionStage},
		{name: "hosts: one name fewer: stage", now: t0.Add(time.Minute), st: fresh, exists: true, published: true,
			hosts: &Hosts{Names: hosts[:1], Since: t0.Add(time.Minute)}, action: ActionStage},
		{name: "hosts: other names, certificate made after the replica started: kept", now: t0.Add(time.Minute), st: fresh,
			exists: true, published: true, hosts: &Hosts{Names: otherHosts, Since: t0.Add(-time.Minute)},
			action: ActionNone, wait: validity - timing.RotateBefore - time.Minute},
		{name: "hosts: other names, an old CA to trim first", now: t0.Add(validity + time.Second), st: afterPromotion,
			exists: true, published: true, hosts: &Hosts{Names: otherHosts, Since: t0.Add(validity)}, action: ActionTrim},
		{name: "hosts: a staged pair for other names made before the replica started: restage", now: stagedAt.Add(time.Second),
			st: inRotation, exists: true, published: true, hosts: &Hosts{Names: otherHosts, Since: stagedAt.Add(time.Second)},
			action: ActionRestage},
		{name: "hosts: a staged pair for other names made after the replica started: promote it", now: stagedAt.Add(timing.PublishDelay),
			st: inRotation, exists: true, published: true, hosts: &renamed, action: ActionPromote},
		{name: "hosts: a staged pair for the names: promote it, whatever the served one names", now: stagedAt.Add(timing.PublishDelay),
			st: staged(t, newStateFor(t, t0, otherHosts), stagedAt), exists: true, published: true,
			hosts: &Hosts{Names: hosts, Since: stagedAt.Add(-time.Second)}, action: ActionPromote},
		{name: "hosts: the served certificate expired, a stale pair staged: promote it first", now: t0.Add(validity),
			st: inRotation, exists: true, hosts: &Hosts{Names: otherHosts, Since: t0.Add(validity)}, action: ActionPromote},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := same
			if tc.hosts != nil {
				h = *tc.hosts
			}
			action, wait := Decide(tc.now, tc.st, tc.exists, tc.published, h, timing)
			assert.Equal(t, tc.action, action)
			assert.Equal(t, tc.wait, wait)
		})
	}
}

func TestRotationKeepsTheServedCertificateTrusted(t *testing.T) {
	st := newState(t, t0)
	oldCA := st.Bundle()
	next := staged(t, st, t0.Add(30*time.Minute))
	require.Len(t, next.cas, 2, "staging adds the new CA to the bundle")
	assert.Equal(t, st.current.certPEM, next.current.certPEM, "staging does not change the served pair")
	assert.Contains(t, string(next.Bundle()), string(oldCA))

	promoted := next.promoted()
	assert.Equal(t, next.next.certPEM, promoted.current.certPEM)
	assert.Equal(t, next.Bundle(), promoted.Bundle(), "promotion keeps the old CA for replicas not yet switched")
	assert.Nil(t, promoted.next)

	trimmed := promoted.trimmed(t0.Add(validity + time.Second))
	require.Len(t, trimmed.cas, 1)
	assert.NotContains(t, string(trimmed.Bundle()), string(oldCA))
	_, err := parseState(trimmed.data(), nil)
	assert.NoError(t, err, "the trimmed bundle still signs the served pair")
}

func TestParseStateRefusesBadInput(t *testing.T) {
	st := newState(t, t0)
	other := newState(t, t0)
	good := st.data()
	with := func(k string, v []byte) map[string][]byte {
		d := st.data()
		d[k] = v
		return d
	}
	_, err := parseState(good, nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		data map[string][]byte
		ann  map[string]string
	}{
		{name: "empty", data: map[string][]byte{}},
		{name: "no CA", data: with(KeyCABundle, nil)},
		{name: "garbage CA", data: with(KeyCABundle, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))},
		{name: "the serving certificate as CA", data: with(KeyCABundle, st.current.certPEM)},
		{name: "pair signed by another CA", data: with(KeyCABundle, other.Bundle())},
		{name: "key of another pair", data: with(KeyKey, other.current.keyPEM)},
		{name: "oversized key", data: with(KeyCert, make([]byte, maxPEMBytes+1))},
		{name: "too many CAs", data: with(KeyCABundle, []byte(repeat(string(st.Bundle()), maxCAs+1)))},
		{name: "next pair without staged-at", data: with(KeyNextCert, st.current.certPEM)},
		{name: "next pair, bad staged-at", data: func() map[string][]byte {
			d := with(KeyNextCert, st.current.certPEM)
			d[KeyNextKey] = st.current.keyPEM
			return d
		}(), ann: map[string]string{AnnotationStagedAt: "yesterday"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseState(tc.data, tc.ann)
			assert.Error(t, err)
		})
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func TestGenerateUsesP256AndTheHosts(t *testing.T) {
	st := newState(t, t0)
	leaf := st.current.leaf()
	assert.Equal(t, []string{"vpa-inplace-webhook.vpa-inplace-system.svc"}, leaf.DNSNames)
	require.Len(t, leaf.IPAddresses, 1)
	assert.Equal(t, "127.0.0.1", leaf.IPAddresses[0].String())
	assert.Equal(t, "ECDSA", leaf.PublicKeyAlgorithm.String())
	assert.Equal(t, t0.Add(validity), leaf.NotAfter)
	assert.Equal(t, t0.Add(-backdate), leaf.NotBefore)
	require.NoError(t, leaf.VerifyHostname("127.0.0.1"))
	require.NoError(t, leaf.VerifyHostname("vpa-inplace-webhook.vpa-inplace-system.svc"))
	assert.Error(t, leaf.VerifyHostname("example.com"))
}
