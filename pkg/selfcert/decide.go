package selfcert

import (
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
	// ActionStage: the served certificate is due; stage a new generation.
	ActionStage Action = "Stage"
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

// Decide returns what st needs at now, and how long until it may need
// something else (0: only a change of the Secret or of the webhook
// configurations can). st is nil when the Secret is absent (exists false) or
// unusable (exists true). published tells whether every named webhook
// configuration carries st's bundle in caBundle.
func Decide(now time.Time, st *State, exists, published bool, t Timing) (Action, time.Duration) {
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
	if !now.Before(rotateAt) {
		return ActionStage, 0
	}
	wait := rotateAt.Sub(now)
	if retire := st.retiredAt(); !retire.IsZero() {
		// A CA expires at its NotAfter: trim just after it.
		wait = min(wait, retire.Sub(now)+time.Second)
	}
	return ActionNone, wait
}
