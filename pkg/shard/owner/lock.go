package owner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errNotAdmitted refuses an acquisition this replica may not make now: a
// shard past its share, a second membership slot. The elector tries again
// after its retry period.
var errNotAdmitted = errors.New("not taken: past this replica's share")

// leaseLock is the resourcelock.Interface of one Lease for client-go's
// LeaderElector, with two differences from client-go's LeaseLock:
//
//   - it reads the Lease from the Owner's informer cache instead of asking
//     the API server at every retry period: a replica watching 2 x shards
//     Leases polls none of them. Writes go to the API server with the
//     resourceVersion read, so a stale cache costs a 409 Conflict, never a
//     second holder; the read after a conflict asks the API server, and
//     the Lease as this replica last wrote it stands in for a cache that
//     has not seen that write yet;
//   - a renewal is sent only once the last write is a renew interval old
//     (Config.RenewInterval), not at every retry period: the elector is
//     told it renewed, and the fence, which runs from writes actually
//     sent, stays open until the next;
//   - every write is told to the Owner (fence): when it was sent, and what
//     it wrote, so that the Owner knows until when no one else can hold the
//     Lease; and an acquisition is first admitted by the Owner's share.
type leaseLock struct {
	o   *Owner
	ref leaseRef

	mu    sync.Mutex
	lease *coordinationv1.Lease // as last read or written
	// written is the Lease as this replica's last write left it, and
	// replaced the resourceVersion that write replaced: a cache still
	// showing replaced has not seen the write yet.
	written  *coordinationv1.Lease
	replaced string
	// stale: a write met a conflict; the next read asks the API server.
	stale bool
}

var _ resourcelock.Interface = (*leaseLock)(nil)

// Get implements resourcelock.Interface: the Lease from the cache, or as
// this replica's last write left it while the cache has not seen that
// write, or from the API server after a conflict.
func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	stale, written, replaced := l.stale, l.written, l.replaced
	l.mu.Unlock()
	var lease *coordinationv1.Lease
	var err error
	if stale {
		lease, err = l.o.client.Leases(l.o.cfg.Namespace).Get(ctx, l.ref.name, metav1.GetOptions{})
	} else {
		lease, err = l.o.leases.Get(l.ref.name)
	}
	if err != nil {
		return nil, nil, err
	}
	if !stale && written != nil && lease.ResourceVersion == replaced {
		lease = written
	}
	lease = lease.DeepCopy()
	l.mu.Lock()
	l.lease = lease
	l.stale = false
	l.mu.Unlock()
	record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*record)
	if err != nil {
		return nil, nil, err
	}
	return record, raw, nil
}

// Create implements resourcelock.Interface.
func (l *leaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	acquiring, err := l.o.admit(l.ref, ler.HolderIdentity)
	if err != nil {
		return err
	}
	sent := l.o.clock.Now()
	created, err := l.o.client.Leases(l.o.cfg.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.o.cfg.Namespace, Name: l.ref.name},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}, metav1.CreateOptions{})
	return l.wrote(ler, acquiring, sent, "", created, err)
}

// Update implements resourcelock.Interface. A renewal within the renew
// interval of the last write is not sent (and succeeds); a write that gives
// the Lease up closes the fence before it is sent.
func (l *leaseLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	lease := l.lease.DeepCopy()
	l.mu.Unlock()
	if lease == nil {
		return fmt.Errorf("lease %s not read yet", l.Describe())
	}
	if l.renewsOnly(lease, ler) && !l.o.renewalDue(l.ref) {
		return nil
	}
	acquiring, err := l.o.admit(l.ref, ler.HolderIdentity)
	if err != nil {
		return err
	}
	if ler.HolderIdentity != l.o.cfg.Identity && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.o.cfg.Identity) {
		// Giving up a Lease another replica took meanwhile: the elector
		// (after a renewal that failed) would write over that replica's
		// record with the version it has just read. Nothing is ours to give
		// up.
		return nil
	}
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	sent := l.o.clock.Now()
	updated, err := l.o.client.Leases(l.o.cfg.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
	return l.wrote(ler, acquiring, sent, lease.ResourceVersion, updated, err)
}

// renewsOnly tells whether writing ler over lease, as last read or written,
// only moves its renew time: the same holder (this replica), lease
// duration and transitions.
func (l *leaseLock) renewsOnly(lease *coordinationv1.Lease, ler resourcelock.LeaderElectionRecord) bool {
	last := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	return ler.HolderIdentity == l.o.cfg.Identity && last.HolderIdentity == ler.HolderIdentity &&
		last.LeaseDurationSeconds == ler.LeaseDurationSeconds && last.LeaderTransitions == ler.LeaderTransitions
}

// wrote keeps what a write returned and tells the Owner of it; replaced is
// the resourceVersion the write replaced.
func (l *leaseLock) wrote(ler resourcelock.LeaderElectionRecord, acquiring bool, sent time.Time, replaced string, lease *coordinationv1.Lease, err error) error {
	if err != nil {
		l.o.writeFailed(l.ref, acquiring)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			l.mu.Lock()
			l.stale = true
			l.mu.Unlock()
		}
		return err
	}
	l.mu.Lock()
	l.lease = lease.DeepCopy()
	l.written, l.replaced = lease.DeepCopy(), replaced
	l.mu.Unlock()
	if ler.HolderIdentity == l.o.cfg.Identity {
		l.o.wrote(l.ref, recordRaw(ler), ler.LeaseDurationSeconds, sent)
	}
	return nil
}

// recordRaw is the record as other candidates compare it (their elector's
// observedRawRecord): the Lease spec written, read back as a record and
// encoded. Its times have a second's precision: two renewals within one
// second look the same to them.
func recordRaw(ler resourcelock.LeaderElectionRecord) []byte {
	spec := resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	raw, _ := json.Marshal(*resourcelock.LeaseSpecToLeaderElectionRecord(&spec))
	return raw
}

// RecordEvent implements resourcelock.Interface; the Owner logs and counts
// the changes itself.
func (l *leaseLock) RecordEvent(string) {}

// Identity implements resourcelock.Interface.
func (l *leaseLock) Identity() string { return l.o.cfg.Identity }

// Describe implements resourcelock.Interface.
func (l *leaseLock) Describe() string { return l.o.cfg.Namespace + "/" + l.ref.name }
