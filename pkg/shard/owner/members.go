package owner

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// liveMembers returns the members whose membership Lease was seen to
// change within its lease duration, and this replica when it holds one.
func (o *Owner) liveMembers(now time.Time) []Member {
	o.mu.Lock()
	defer o.mu.Unlock()
	var members []Member
	self := o.memberSlotLocked()
	if self >= 0 {
		members = append(members, Member{Slot: self, Identity: o.cfg.Identity})
	}
	for i := range o.members {
		if i == self {
			continue
		}
		if holder := o.liveHolderLocked(MemberLeaseName(o.cfg.Prefix, i), now); holder != "" && holder != o.cfg.Identity {
			members = append(members, Member{Slot: i, Identity: holder})
		}
	}
	return members
}

// liveHolderLocked returns who holds a Lease, as this replica last saw it
// change within its lease duration; "" when no one or expired.
func (o *Owner) liveHolderLocked(name string, now time.Time) string {
	lease, err := o.leases.Get(name)
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || lease.Spec.LeaseDurationSeconds == nil {
		return ""
	}
	if !now.Before(o.seen[name].at.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)) {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// memberSlotLocked returns the membership slot this replica holds and no
// other replica may take yet, -1 when none.
func (o *Owner) memberSlotLocked() int {
	now := o.clock.Now()
	for i, f := range o.members {
		if f.held && now.Before(f.validUntil) {
			return i
		}
	}
	return -1
}

// ensureMemberLocked runs an elector on a free membership slot while this
// replica holds none, and moves to another when a live replica takes it.
func (o *Owner) ensureMemberLocked(ctx context.Context, wg *sync.WaitGroup, now time.Time) {
	if o.memberSlotLocked() >= 0 {
		return
	}
	if o.memberRunner != nil {
		holder := o.liveHolderLocked(MemberLeaseName(o.cfg.Prefix, o.memberTrying), now)
		if holder != "" && holder != o.cfg.Identity {
			o.memberRunner.cancel()
		}
		return
	}
	slot := -1
	for i := range o.members {
		if o.liveHolderLocked(MemberLeaseName(o.cfg.Prefix, i), now) == "" {
			slot = i
			break
		}
	}
	if slot < 0 {
		return // as many members as shards: this replica stands by
	}
	runCtx, cancel := context.WithCancel(o.runners)
	r := &runner{cancel: cancel, done: make(chan struct{})}
	o.memberRunner, o.memberTrying = r, slot
	ref := leaseRef{kind: kindMember, index: slot, name: MemberLeaseName(o.cfg.Prefix, slot)}
	klog.FromContext(ctx).V(2).Info("Asking for a membership slot", "lease", ref.name)
	wg.Go(func() {
		o.elect(runCtx, ref)
		cancel()
		o.lost(ref)
		o.mu.Lock()
		o.memberRunner, o.memberTrying = nil, -1
		o.mu.Unlock()
		close(r.done)
		o.poke()
	})
}
