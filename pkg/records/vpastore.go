package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	vpaclient "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/typed/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
)

// VPAStore is a Store that keeps records in memory, where decisions read
// them, and writes the records of each VPA's pods into an annotation on that
// VPA (AnnotationKey, or MemoryAnnotationKey for the memory records), from
// where Load reads them back after a restart or a change of leader.
//
// On the VPA, because:
//   - the records go away with the VPA, and the only new right needed is
//     patch on verticalpodautoscalers (not on pods, nor a ConfigMap per VPA);
//   - the annotation is metadata: the recommender writes only the status
//     subresource (the whole of it), which leaves metadata alone;
//   - one write per VPA covers all its pods, and pods of one workload share
//     their attempts in the value.
//
// Writes are made by Run, one VPA at a time, as soon as its records change,
// and only when the value differs from what the VPA already carries. A failed
// write is retried with backoff (500 ms to 5 min) while the records stay in
// memory; nothing is dropped except for a VPA that no longer exists.
type VPAStore struct {
	durable
	client vpaclient.VerticalPodAutoscalersGetter
	lister vpalisters.VerticalPodAutoscalerLister
	cfg    VPAStoreConfig
	key    string

	// written (guarded by mu) holds, by Owner.id, the value this store last
	// wrote to each VPA, or read from it by Load. It is what the VPA carries even while the cache
	// still shows an older value: a record put and deleted before the
	// cache saw it written must still be removed from the annotation, and
	// so must a record a new leader loaded and deleted before its cache
	// saw the previous leader's last write.
	written map[string]string
}

var _ Store = (*VPAStore)(nil)

// VPAStoreConfig configures a VPAStore.
type VPAStoreConfig struct {
	// Namespace limits Load to the VPAs of one namespace; empty: all.
	Namespace string
	// MaxBytes bounds each VPA's annotation; 0 means
	// DefaultMaxAnnotationBytes.
	MaxBytes int
	// AnnotationKey is the annotation written; empty means AnnotationKey.
	AnnotationKey string
	// Live tells whether uid is a live pod or Job of owner's namespace.
	// Load keeps a record only when it is, so that a VPA cannot hold
	// records for pods that are gone or for another tenant's. It is called
	// after the caches have synced, before any worker starts, from one
	// goroutine, once per record read: it must be an index lookup, never a
	// read of the API server nor an owner walk. Whether the pod's VPA is
	// owner is told at the pod's first sync (Store.GetFor), with the VPA
	// the sync resolves anyway. Nil keeps every well-formed record (tests,
	// dry run).
	Live func(owner Owner, uid types.UID) bool
	// Metrics counts dropped records and failed writes; nil counts nothing.
	Metrics *Metrics
	// LoadTimeout bounds Load; 0 means DefaultLoadTimeout.
	LoadTimeout time.Duration
	// Now is the clock records' times are checked against: a record more
	// than FutureSkew ahead of it is dropped. Nil checks no time (tests
	// whose clock is not the wall clock); the updater passes its clock.
	Now func() time.Time
}

// DefaultLoadTimeout bounds Load: listing every VPA, in pages, and decoding
// their annotations (each in bounded time).
const DefaultLoadTimeout = time.Minute

// NewVPAStore returns an empty store writing through client and reading the
// VPAs' current annotations from lister.
func NewVPAStore(client vpaclient.VerticalPodAutoscalersGetter, lister vpalisters.VerticalPodAutoscalerLister, cfg VPAStoreConfig) *VPAStore {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxAnnotationBytes
	}
	if cfg.AnnotationKey == "" {
		cfg.AnnotationKey = AnnotationKey
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = DefaultLoadTimeout
	}
	s := &VPAStore{
		client:  client,
		lister:  lister,
		cfg:     cfg,
		key:     cfg.AnnotationKey,
		written: map[string]string{},
	}
	s.durable = newDurable(cfg.AnnotationKey, cfg.Metrics, s.write)
	return s
}

// ForgetOwner implements Store. The VPA is gone and its annotation with it:
// nothing is written.
func (s *VPAStore) ForgetOwner(owner Owner) int {
	s.mu.Lock()
	delete(s.owners, owner.id())
	delete(s.written, owner.id())
	delete(s.failing, owner.id())
	delete(s.leftOut, owner.id())
	s.mu.Unlock()
	return s.mem.ForgetOwner(owner)
}

// Load implements Store: it lists the VPAs from the API server (a
// consistent read, not a cache that may lag behind the previous leader's
// last writes) and holds the records of every annotation. The annotations
// are untrusted input (anyone who may edit a VPA may edit them):
// DecodeAnnotation bounds the work each costs and drops malformed records,
// a record is only kept when cfg.Live says its UID is a live pod or Job of
// the VPA's namespace, and it is only believed for a pod whose VPA is the
// one carrying it (GetFor). An annotation that cannot be read, or of which
// records were dropped, is rewritten with the records kept.
//
// Load lists in pages and gives up after cfg.LoadTimeout: a slow API server
// or one large VPA never holds the updater longer. Loaded tells how far it
// got.
func (s *VPAStore) Load(ctx context.Context) error {
	return s.loadWith(ctx, s.cfg.LoadTimeout, s.cfg.Now, s.load)
}

func (s *VPAStore) load(ctx context.Context, now time.Time) error {
	logger := klog.FromContext(ctx)
	l := newLoading(s.cfg.Metrics, s.key)
	written := map[string]string{}
	vpas := 0
	err := listVPAs(ctx, s.client, s.cfg.Namespace, "", func(owner Owner, annotations map[string]string) {
		vpas++
		// What the VPA carries, as of this consistent read: a write
		// compares with it, not with a cache that may lag.
		value, ok := annotations[s.key]
		written[owner.id()] = value
		if !ok {
			return
		}
		d, _ := DecodeAnnotation(value, decodeOptions(owner, now, s.cfg.Live, s.cfg.MaxBytes))
		l.add(ctx, owner, "annotation "+s.key, d)
	})
	if err != nil {
		return fmt.Errorf("listing VPAs to load the records of %s: %w", s.key, err)
	}
	s.mem.replace(l.loaded)
	s.mu.Lock()
	s.owners = l.owners
	s.written = written
	s.mu.Unlock()
	for key := range l.rewrite {
		s.queue.Add(key)
	}
	logger.Info("Loaded records", "annotation", s.key, "records", len(l.loaded), "vpas", vpas, "dropped", l.dropped, "rewritten", len(l.rewrite))
	return nil
}

// loadPageSize is the number of objects Load asks for at once: the largest
// page holds loadPageSize values of at most 1 MiB.
const loadPageSize = 100

// write brings the annotation of one VPA up to date with the records held.
func (s *VPAStore) write(ctx context.Context, id string) error {
	logger := klog.FromContext(ctx)
	records := s.mem.byOwner(id)
	value, left, err := EncodeAnnotation(records, s.cfg.MaxBytes)
	if err != nil {
		return err
	}
	s.setLeftOut(id, len(left))
	s.mu.Lock()
	owner, known := s.owners[id]
	last, wrote := s.written[id]
	s.mu.Unlock()
	if !known {
		return nil // forgotten: the VPA and its annotation are gone
	}
	namespace, name, uid, key := owner.Namespace, owner.Name, owner.UID, owner.Key()

	vpa, err := s.lister.VerticalPodAutoscalers(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		// Not in the cache, which may lag behind a new VPA: it carries what
		// this store last wrote to it, or nothing.
		if last == value && (wrote || value == "") {
			return nil
		}
	case err != nil:
		return fmt.Errorf("reading VPA %s from cache: %w", key, err)
	default:
		// Once this store has written the VPA, its own last write is what
		// the VPA carries; the cache may not have seen it yet.
		current := vpa.Annotations[s.key]
		if wrote {
			current = last
		}
		if current == value {
			return nil
		}
		if uid == "" {
			uid = vpa.UID
		}
	}

	patch, err := annotationPatch(s.key, uid, value)
	if err != nil {
		return err
	}
	_, err = s.client.VerticalPodAutoscalers(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		s.mu.Lock()
		s.written[id] = value
		s.mu.Unlock()
		logger.V(4).Info("Wrote records", "vpa", key, "annotation", s.key, "records", len(records)-len(left), "bytes", len(value))
		if len(left) > 0 {
			logger.Info("Records left out of the VPA annotation to keep it small; they are held in memory only",
				"vpa", key, "annotation", s.key, "leftOut", len(left), "maxBytes", s.cfg.MaxBytes)
		}
		return nil
	case gone(err):
		// Gone, or replaced by a new VPA of the same name (the UID in the
		// patch no longer matches): the records have nowhere to go.
		s.mu.Lock()
		delete(s.written, id)
		s.mu.Unlock()
		logger.V(2).Info("VPA gone; its records are held in memory only", "vpa", key, "annotation", s.key, "err", err)
		return nil
	default:
		s.cfg.Metrics.writeFailed(s.key, writeFailure(err))
		return fmt.Errorf("patching VPA %s: %w", key, err)
	}
}

// gone tells whether a failed patch says that the VPA the records belong to
// no longer exists: 404, or a UID that no longer matches (a new VPA of the
// same name), which the API server answers with 409 "Precondition failed:
// UID in precondition" or 422 on metadata.uid. Any other 409 or 422 (all
// annotations together over 256 KiB, a webhook refusing the VPA) is a
// failure, retried.
func gone(err error) bool {
	if apierrors.IsNotFound(err) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	switch {
	case apierrors.IsConflict(err):
		return strings.Contains(st.Message, "UID in precondition")
	case apierrors.IsInvalid(err) && st.Details != nil:
		for _, c := range st.Details.Causes {
			if c.Field == "metadata.uid" {
				return true
			}
		}
	}
	return false
}

// writeFailure is the reason label of a failed write.
func writeFailure(err error) string {
	switch {
	case apierrors.IsInvalid(err):
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Details != nil {
			for _, c := range status.Status().Details.Causes {
				if strings.HasPrefix(c.Field, "metadata.annotations") {
					return WriteTooLarge
				}
			}
		}
		return WriteInvalid
	case apierrors.IsConflict(err):
		return WriteConflict
	case apierrors.IsForbidden(err):
		return WriteForbidden
	default:
		return WriteOther
	}
}

// annotationPatch is a JSON merge patch setting (or, for "", removing) the
// annotation. With uid set, the API server refuses it when the VPA of that
// name is not the one the records belong to. Without a resourceVersion it
// never conflicts with other writers: only the leader writes this annotation.
func annotationPatch(key string, uid types.UID, value string) ([]byte, error) {
	metadata := map[string]any{}
	if uid != "" {
		metadata["uid"] = uid
	}
	if value == "" {
		metadata["annotations"] = map[string]any{key: nil}
	} else {
		metadata["annotations"] = map[string]any{key: value}
	}
	return json.Marshal(map[string]any{"metadata": metadata})
}
