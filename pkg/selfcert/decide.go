package selfcert

import (
	"net"
	"slices"
	"strings"
	"time"
)

// Action is what the Secret needs next.
type Action string

// Actions decided by Decide.
const (
	// ActionNone: nothing to write until the returned wait has passed or
	// something changes.
	ActionNone Action = "None"
	// ActionCreate: there is no Secret; create it.
	ActionCreate Action = "Create"
	// ActionReplace: the Secret is unusable; write a fresh generation.
	ActionReplace Action = "Replace"
	// ActionStage: the served certificate is due, or names other hosts than
	// the configured ones; stage a new generation.
	ActionStage Action = "Stage"
	// ActionRestage: the staged pair names other hosts than the configured
	// ones; stage a new generation in its place.
	ActionRestage Action = "Restage"
	// ActionPromote: the next pair's CA is published; serve the next pair.
	ActionPromote Action = "Promote"
	// ActionTrim: CAs that signed nothing served have expired; drop them
	// from the bundle.
	ActionTrim Action = "Trim"
)

// Timing is when rotations happen.
type Timing struct {
	// RotateBefore is how long before the served certificate expires a new
	// one is staged.
	RotateBefore time.Duration
	// PublishDelay is how long a staged CA is in the published caBundle
	// before its pair is served: time for every API server to see the new
	// caBundle, and for every replica to agree on it.
	PublishDelay time.Duration
}

// Hosts is what the served certificate must name, for one replica.
type Hosts struct {
	// Names are the DNS names and IP addresses of --cert-hosts: a
	// certificate names them when its subject alternative names are these,
	// no more and no fewer, in any order.
	Names []string
	// Since is when the replica started with these names. A certificate
	// made before it for other names is stale (the names changed): it is
	// replaced. One made after it for other names was made by a replica
	// started later, whose configuration is the newer one (an older replica
	// of a rolling update): it is kept, so that replicas of two
	// configurations never rotate back and forth.
	Since time.Time
}

// stale tells whether p is a pair made before h.Since for other names.
func (h Hosts) stale(p *pair) bool {
	leaf := p.leaf()
	return leaf.NotBefore.Add(backdate).Before(h.Since) && !names(leaf.DNSNames, leaf.IPAddresses, h.Names)
}

// names tells whether dns and ips are exactly hosts, as sets.
func names(dns []string, ips []net.IP, hosts []string) bool {
	var have, want []string
	for _, d := range dns {
		have = append(have, "dns:"+strings.ToLower(d))
	}
	for _, ip := range ips {
		have = append(have, "ip:"+ip.String())
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			want = append(want, "ip:"+ip.String())
		} else {
			want = append(want, "dns:"+strings.ToLower(h))
		}
	}
	slices.Sort(have)
	slices.Sort(want)
	return slices.Equal(slices.Compact(have), slices.Compact(want))
}

// Decide returns what st needs at now, and how long until it may need
// something else (0: only a change of the Secret or of the webhook
// configurations can). st is nil when the Secret is absent (exists false) or
// unusable (exists true). published tells whether every named webhook
// configuration carries st's bundle in caBundle. h is what the served
// certificate must name: a stale pair (Hosts.stale) is replaced through a
// rotation, so that no call fails on the way.
func Decide(now time.Time, st *State, exists, published bool, h Hosts, t Timing) (Action, time.Duration) {
	if st == nil {
		if exists {
			return ActionReplace, 0
		}
		return ActionCreate, 0
	}
	notAfter := st.current.leaf().NotAfter
	if st.next != nil {
		promoteAt := st.stagedAt.Add(t.PublishDelay)
		switch {
		case !now.Before(notAfter):
			// The served certificate has expired: the next one cannot be
			// worse.
			return ActionPromote, 0
		case h.stale(st.next):
			return ActionRestage, 0
		case published && !now.Before(promoteAt):
			return ActionPromote, 0
		case published:
			return ActionNone, promoteAt.Sub(now)
		default:
			// Waiting for the caBundle patch to be seen; re-check at expiry
			// at the latest.
			return ActionNone, min(notAfter.Sub(now), max(t.PublishDelay, time.Second))
		}
	}
	// Trim first, so that the bundle holds at most two CAs at a time.
	if len(st.expiredCAs(now)) > 0 {
		return ActionTrim, 0
	}
	rotateAt := notAfter.Add(-t.RotateBefore)
	if !now.Before(rotateAt) || h.stale(&st.current) {
		return ActionStage, 0
	}
	wait := rotateAt.Sub(now)
	if retire := st.retiredAt(); !retire.IsZero() {
		// A CA expires at its NotAfter: trim just after it.
		wait = min(wait, retire.Sub(now)+time.Second)
	}
	return ActionNone, wait
}
