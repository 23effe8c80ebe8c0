package owner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotHeld refuses a write for a shard this replica does not hold, or
// cannot be sure to hold for as long as the request may take.
var ErrNotHeld = errors.New("shard not held")

// fence is what the Owner knows of one of its Leases.
//
// held says that this replica's last write of the Lease named it holder.
// validUntil is how long no other replica can take the Lease over: a
// candidate's elector (client-go's) takes over a Lease only once it has
// seen its record unchanged for the record's lease duration, and it sees a
// record no sooner than the API server stored it, no sooner than this
// replica sent it. So a record first sent at t keeps every other replica
// out until t + its lease duration, on their clocks as on this one (clock
// rates, not times, are compared). A candidate compares records with a
// second's precision (their times are encoded so): renewals within one
// second are one record to it, so validity runs from the first send of the
// record, not the last.
type fence struct {
	held bool
	// heldRun: held at some time during the elector's current run.
	heldRun    bool
	raw        []byte
	firstSent  time.Time
	validUntil time.Time
	// lastSent is when the last write the API server accepted was sent.
	lastSent time.Time
	// releasing: the Lease is being given up; no new write is let through.
	releasing bool
	// acquiring: an acquisition admitted and not answered yet.
	acquiring bool
	// inflight counts the writes let through (Guard) and not done; their
	// cancels are called when the fence closes.
	inflight int
	cancels  map[uint64]context.CancelFunc
}

// wrote records a write of this replica's record that the API server
// accepted, sent at sent.
func (f *fence) wrote(raw []byte, leaseSeconds int, sent time.Time) {
	if !f.held || !bytes.Equal(f.raw, raw) {
		f.firstSent = sent
		f.raw = raw
	}
	f.held, f.heldRun = true, true
	f.lastSent = sent
	f.acquiring = false
	f.validUntil = f.firstSent.Add(time.Duration(leaseSeconds) * time.Second)
}

// close forgets the Lease and cancels the writes in flight.
func (f *fence) close() {
	f.held = false
	f.raw = nil
	f.validUntil = time.Time{}
	for _, cancel := range f.cancels {
		cancel()
	}
}

// lets tells whether a write of at most timeout may start at now.
func (f *fence) lets(now time.Time, timeout time.Duration) bool {
	return f.held && !f.releasing && !now.Add(timeout).After(f.validUntil)
}

// Guard lets one write for namespace through when this replica holds its
// shard for at least the request timeout (Config.RequestTimeout) from now:
// it returns the context to send it with, whose deadline ends the request
// within the time no other replica can hold the shard, and the function to
// call once the write is answered. Giving the shard up (a rebalance) waits
// for the writes let through, after cancelling them; losing it cancels
// them. Otherwise it returns ErrNotHeld, and nothing may be sent.
//
// So a PATCH is never in flight, as far as this client knows, once another
// replica may hold its shard: it was sent within the time the Lease stays
// this replica's, and its deadline is no later. What the client cannot
// know is a request that reached the API server and waits there past the
// client's deadline; the API server abandons a request whose client has
// gone (its context is cancelled) before it writes to storage, in the
// ordinary case.
func (o *Owner) Guard(ctx context.Context, namespace string) (context.Context, func(), error) {
	k := o.cfg.Layout.Of(namespace)
	now := o.clock.Now()
	timeout := o.cfg.RequestTimeout()
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.shards[k]
	if !f.lets(now, timeout) {
		return nil, nil, fmt.Errorf("namespace %s, shard %d: %w", namespace, k, ErrNotHeld)
	}
	o.nextGuard++
	id := o.nextGuard
	wctx, cancel := context.WithDeadline(ctx, now.Add(timeout))
	if f.cancels == nil {
		f.cancels = map[uint64]context.CancelFunc{}
	}
	f.cancels[id] = cancel
	f.inflight++
	done := false
	return wctx, func() {
		cancel()
		o.mu.Lock()
		defer o.mu.Unlock()
		if done {
			return
		}
		done = true
		delete(f.cancels, id)
		f.inflight--
		if f.inflight == 0 {
			o.cond.Broadcast()
		}
	}, nil
}

// Held returns the shards this replica holds now, for as long as a write
// takes.
func (o *Owner) Held() []int {
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	var held []int
	for k, f := range o.shards {
		if f.lets(now, o.cfg.RequestTimeout()) {
			held = append(held, k)
		}
	}
	return held
}

// quiesceLocked closes f to new writes, cancels those in flight and waits
// for them.
func (o *Owner) quiesceLocked(f *fence) {
	if !f.held {
		return
	}
	f.releasing = true
	for _, cancel := range f.cancels {
		cancel()
	}
	for f.inflight > 0 {
		o.cond.Wait()
	}
}

// admit decides on a write of ref's Lease naming holder, before it is
// sent: giving the Lease up closes its fence first; renewing it needs
// nothing; taking it (acquiring true) must fit this replica's share: one
// membership slot, and shards up to its share while a member.
func (o *Owner) admit(ref leaseRef, holder string) (acquiring bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.fenceLocked(ref)
	switch {
	case holder != o.cfg.Identity:
		f.close()
		return false, nil
	case f.held:
		return false, nil
	case o.ctx == nil || o.ctx.Err() != nil:
		return false, errNotAdmitted // stopping
	}
	switch ref.kind {
	case kindMember:
		for _, m := range o.members {
			if m.held || m.acquiring {
				return false, errNotAdmitted
			}
		}
	case kindShard:
		taken := 0
		for _, s := range o.shards {
			if s.held || s.acquiring {
				taken++
			}
		}
		if o.memberSlotLocked() < 0 || taken >= o.target {
			return false, errNotAdmitted
		}
	}
	f.acquiring = true
	return true, nil
}

// wrote is told of a write naming this replica that the API server
// accepted.
func (o *Owner) wrote(ref leaseRef, raw []byte, leaseSeconds int, sent time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fenceLocked(ref).wrote(raw, leaseSeconds, sent)
}

// renewalDue tells whether a renewal of ref's Lease, which this replica
// holds, must be sent now: false while its last accepted write is younger
// than the renew interval. A Lease not held (taken, lost, being given up)
// is always written.
func (o *Owner) renewalDue(ref leaseRef) bool {
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.fenceLocked(ref)
	return !f.held || f.releasing || now.Sub(f.lastSent) >= o.cfg.RenewInterval()
}

// writeFailed is told of a write that failed.
func (o *Owner) writeFailed(ref leaseRef, acquiring bool) {
	if !acquiring {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fenceLocked(ref).acquiring = false
}

func (o *Owner) fenceLocked(ref leaseRef) *fence {
	if ref.kind == kindMember {
		return o.members[ref.index]
	}
	return o.shards[ref.index]
}
