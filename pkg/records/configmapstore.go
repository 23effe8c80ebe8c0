package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"

	vpaclient "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/typed/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
)

// ConfigMapStore is a Store that keeps records in memory, where decisions
// read them, and writes the records of each VPA's pods into a ConfigMap of
// the updater's own namespace, one per VPA and store, in the compact format
// (EncodeCompact): the records of 10,000 pods of one VPA fit. Load reads
// them back after a restart or a change of leader. docs/records.md says why
// there and not on the VPA.
//
// Records are held for a VPA by its UID, and its ConfigMap is named after
// the UID (ConfigMapName), so that a new VPA of the same name never inherits
// records, in memory or written; it carries the VPA's namespace, name and
// UID in annotations. A ConfigMap is written only for a VPA the cache holds
// with that UID, so that a record put while its VPA is deleted leaves no
// ConfigMap behind. Tenants cannot write it (it is not in their
// namespaces); it is still decoded defensively, a record is kept only for a
// live pod or Job of the VPA's namespace, and it is only believed for a pod
// whose VPA is that one (GetFor).
//
// Load also reads the records annotation of the VPAs (where VPAStore kept
// them), writes what it kept into the ConfigMaps and then removes the
// annotation: the migration from VPAStore.
type ConfigMapStore struct {
	durable
	configMaps corev1client.ConfigMapsGetter
	vpas       vpaclient.VerticalPodAutoscalersGetter
	lister     vpalisters.VerticalPodAutoscalerLister
	cfg        ConfigMapStoreConfig

	// Guarded by mu, by Owner.id.
	// written is what the ConfigMap of each VPA holds, as last written or
	// read by Load.
	written map[string]writtenConfigMap
	// migrate holds the VPAs whose records annotation is still to be
	// removed, once their records are in their ConfigMap.
	migrate map[string]Owner
	// forgotten holds the VPAs ForgetOwner was told are gone, until their
	// ConfigMap is deleted: records a worker put for them meanwhile are
	// forgotten too.
	forgotten map[string]bool
	// merged is told of the records taken from another writer (reread).
	merged func(owner Owner, taken map[types.UID]*Record)
	// earlier holds, by VPA, the ConfigMap of the earlier name its records
	// were read from, until they are moved (deleteEarlier).
	earlier map[string]string
}

// writtenConfigMap is what a VPA's ConfigMap holds, as this store last read
// or wrote it.
type writtenConfigMap struct {
	owner           Owner
	value           string
	resourceVersion string
}

var (
	_ Store   = (*ConfigMapStore)(nil)
	_ Merging = (*ConfigMapStore)(nil)
)

// Merging is a Store that may take records another writer made (a deposed
// leader's last write, met after a conflict): those who keep state derived
// from its records are told of them.
type Merging interface {
	// OnMerged sets the function told of the records of a VPA taken from
	// another writer; it is called without any of the store's locks held.
	OnMerged(fn func(owner Owner, taken map[types.UID]*Record))
}

// OnMerged implements Merging.
func (s *ConfigMapStore) OnMerged(fn func(owner Owner, taken map[types.UID]*Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.merged = fn
}

// ConfigMapStoreConfig configures a ConfigMapStore.
type ConfigMapStoreConfig struct {
	// Namespace holds the ConfigMaps: the updater's own. Required.
	Namespace string
	// Store names the store in the ConfigMaps' names and labels, in logs
	// and in the store label of the metrics: StoreInfeasible or
	// StoreMemory.
	Store string
	// Prefix begins the ConfigMaps' names, so that two installs in one
	// namespace keep their records apart (ValidatePrefix); empty:
	// DefaultConfigMapPrefix. With another prefix, the records of the
	// earlier name are moved (loadOthers).
	Prefix string
	// AnnotationKey is the VPA annotation the records are migrated from:
	// AnnotationKey or MemoryAnnotationKey.
	AnnotationKey string
	// NoAnnotation: the store's records were never kept in an annotation
	// (StoreSafety): nothing is migrated, AnnotationKey is not read.
	NoAnnotation bool
	// VPANamespace limits Load to the VPAs of one namespace, and to their
	// ConfigMaps; empty: all.
	VPANamespace string
	// IgnoredNamespaces are namespaces whose VPAs this updater does not
	// serve: their records and ConfigMaps are left to the updater that does.
	IgnoredNamespaces []string
	// Serves, when set, tells the namespaces this store serves (a replica
	// serving some shards of namespaces): the VPAs of the others, their
	// records and their ConfigMaps are left to the replicas that serve
	// them; a ConfigMap of another namespace whose VPA is gone is theirs to
	// delete. nil: every namespace.
	Serves func(namespace string) bool
	// ShardSelector, when set, is sent with the lists of VPAs (the
	// shardSelector of the namespaces Serves tells), so that an API server
	// serving sharded lists sends only those; Serves decides all the same.
	ShardSelector string
	// Owner, when set, is the owner reference every ConfigMap is written
	// with (at each create and update, so that one written before gets it
	// too): an object of the install (the updater's Lease) whose deletion,
	// at uninstall, has the garbage collector delete the records. It must
	// live in Namespace. nil: the ConfigMaps have no owner.
	Owner *metav1.OwnerReference
	// MaxBytes bounds each ConfigMap's value; 0 means
	// DefaultMaxCompactBytes.
	MaxBytes int
	// Live, Metrics, LoadTimeout and Now are as in VPAStoreConfig.
	Live        func(owner Owner, uid types.UID) bool
	Metrics     *Metrics
	LoadTimeout time.Duration
	Now         func() time.Time
}

// The stores of the updater.
const (
	// StoreInfeasible holds the infeasible, invalid and Job records.
	StoreInfeasible = "infeasible"
	// StoreMemory holds the memory records.
	StoreMemory = "memory"
	// StoreSafety holds the records of the watch after a resize: canaries,
	// reverts due and harm holds (KindCanary, KindRevert, KindHarmHold).
	StoreSafety = "safety"
	// StoreJVM holds the memory limits JVMs started with
	// (KindLimitAtStart).
	StoreJVM = "jvm"
)

// Names on the ConfigMaps.
const (
	// ConfigMapDataKey is the key of the records in a ConfigMap's data.
	ConfigMapDataKey = "records"
	// LabelStore is the label naming a ConfigMap's store; Load lists by it.
	LabelStore = "vpa-inplace.dev/records"
	// AnnotationVPANamespace, AnnotationVPAName and AnnotationVPAUID name
	// the VPA whose records a ConfigMap holds.
	AnnotationVPANamespace = "vpa-inplace.dev/vpa-namespace"
	AnnotationVPAName      = "vpa-inplace.dev/vpa-name"
	AnnotationVPAUID       = "vpa-inplace.dev/vpa-uid"
	managedBy              = "vpa-inplace-updater"
)

// ConfigMapName is the name of the ConfigMap holding the records of store
// for the VPA of that UID, with the default prefix.
func ConfigMapName(store string, vpaUID types.UID) string {
	return ConfigMapNameWithPrefix(DefaultConfigMapPrefix, store, vpaUID)
}

// NewConfigMapStore returns an empty store writing ConfigMaps through
// configMaps and migrating from the VPAs' annotations through vpas; lister
// tells whether a VPA records were put for is still there.
func NewConfigMapStore(configMaps corev1client.ConfigMapsGetter, vpas vpaclient.VerticalPodAutoscalersGetter,
	lister vpalisters.VerticalPodAutoscalerLister, cfg ConfigMapStoreConfig) (*ConfigMapStore, error) {
	if cfg.Namespace == "" {
		return nil, fmt.Errorf("records store %q: no namespace for its ConfigMaps", cfg.Store)
	}
	if errs := validation.IsDNS1123Label(cfg.Store); len(errs) > 0 {
		return nil, fmt.Errorf("records store %q: %v", cfg.Store, errs)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultConfigMapPrefix
	}
	if err := ValidatePrefix(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("records store %q: %w", cfg.Store, err)
	}
	if cfg.AnnotationKey == "" {
		cfg.AnnotationKey = AnnotationKey
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxCompactBytes
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = DefaultLoadTimeout
	}
	s := &ConfigMapStore{
		configMaps: configMaps,
		vpas:       vpas,
		lister:     lister,
		cfg:        cfg,
		written:    map[string]writtenConfigMap{},
		migrate:    map[string]Owner{},
		forgotten:  map[string]bool{},
		earlier:    map[string]string{},
	}
	s.durable = newDurable(cfg.Store, cfg.Metrics, s.write)
	return s, nil
}

// ForgetOwner implements Store. The VPA is gone; its ConfigMap is deleted
// by the write this queues.
func (s *ConfigMapStore) ForgetOwner(owner Owner) int {
	id := owner.id()
	s.mu.Lock()
	delete(s.owners, id)
	delete(s.migrate, id)
	s.forgotten[id] = true
	s.mu.Unlock()
	n := s.mem.ForgetOwner(owner)
	s.queue.Add(id)
	return n
}

// ErrNotWritable says that the records namespace does not exist, or that
// the updater may not create ConfigMaps there (CheckWritable).
var ErrNotWritable = errors.New("records namespace missing or not writable")

// CheckWritable tells whether store's records ConfigMaps, their names
// beginning with prefix, can be created in namespace, by asking the API
// server to create one with dryRun=All: it answers as it would for a real
// one (the namespace exists, RBAC allows it, admission admits it) and
// stores nothing. A missing namespace or a refusal is ErrNotWritable, with
// what to do; any other error (the API server not reachable) is returned as
// is.
func CheckWritable(ctx context.Context, configMaps corev1client.ConfigMapsGetter, namespace, prefix, store string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:      ConfigMapNameWithPrefix(prefix, store, "write-check"),
		Namespace: namespace,
		Labels:    map[string]string{LabelStore: store, "app.kubernetes.io/managed-by": managedBy},
	}}
	_, err := configMaps.ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: namespace %q does not exist; create it, or set --records-namespace (default: the updater's own namespace, POD_NAMESPACE): %w",
			ErrNotWritable, namespace, err)
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
		return fmt.Errorf("%w: ConfigMaps cannot be created in namespace %q (the updater's Role there, or an admission policy, refuses them): %w",
			ErrNotWritable, namespace, err)
	default:
		return fmt.Errorf("checking that records can be written into namespace %q: %w", namespace, err)
	}
}

// Load implements Store: it checks that its ConfigMaps can be written
// (CheckWritable), lists the VPAs and the store's ConfigMaps from the API
// server (consistent reads, in pages, within cfg.LoadTimeout),
// keeps the well-formed records of each ConfigMap whose VPA still exists
// for the live pods and Jobs of its namespace (cfg.Live: no owner walk, no
// read per record), deletes the ConfigMaps of VPAs that are gone, and reads
// the records annotations left by VPAStore for migration.
func (s *ConfigMapStore) Load(ctx context.Context) error {
	return s.loadWith(ctx, s.cfg.LoadTimeout, s.cfg.Now, s.load)
}

func (s *ConfigMapStore) load(ctx context.Context, now time.Time) error {
	// Nothing is decided before the records can be written: a resize sent
	// whose record could not be kept would be sent again after a restart.
	if err := CheckWritable(ctx, s.configMaps, s.cfg.Namespace, s.cfg.Prefix, s.cfg.Store); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	l := newLoading(s.cfg.Metrics, s.name)
	live := map[types.UID]Owner{}
	migrate := map[string]Owner{}
	ignored := sets.New(s.cfg.IgnoredNamespaces...)
	err := listVPAs(ctx, s.vpas, s.cfg.VPANamespace, s.cfg.ShardSelector, func(owner Owner, annotations map[string]string) {
		if ignored.Has(owner.Namespace) || !s.serves(owner.Namespace) {
			return
		}
		live[owner.UID] = owner
		value, ok := annotations[s.cfg.AnnotationKey]
		if !ok || s.cfg.NoAnnotation {
			return
		}
		migrate[owner.id()] = owner
		d, _ := DecodeAnnotation(value, decodeOptions(owner, now, s.cfg.Live, DefaultMaxAnnotationBytes))
		l.add(ctx, owner, "annotation "+s.cfg.AnnotationKey, d)
	})
	if err != nil {
		return fmt.Errorf("listing VPAs to load the %s records: %w", s.name, err)
	}
	written := map[string]writtenConfigMap{}
	earlier := map[string]string{}
	var orphans []string
	err = s.listConfigMaps(ctx, func(cm *corev1.ConfigMap) {
		if s.loadOthers(ctx, cm, live, l, earlier, now) {
			return
		}
		uid := types.UID(cm.Annotations[AnnotationVPAUID])
		owner, ok := live[uid]
		switch {
		case ok && cm.Name == s.configMapName(uid):
		case ignored.Has(cm.Annotations[AnnotationVPANamespace]), !s.serves(cm.Annotations[AnnotationVPANamespace]):
			return // served by another updater, or another replica
		case s.cfg.VPANamespace == "" || cm.Annotations[AnnotationVPANamespace] == s.cfg.VPANamespace:
			// Its VPA is gone (or it names none): its records hold
			// nothing any more.
			orphans = append(orphans, cm.Name)
			return
		default:
			return // a VPA of a namespace this updater does not serve
		}
		value := cm.Data[ConfigMapDataKey]
		written[owner.id()] = writtenConfigMap{owner: owner, value: value, resourceVersion: cm.ResourceVersion}
		d, _ := DecodeCompact(value, decodeOptions(owner, now, s.cfg.Live, s.cfg.MaxBytes))
		l.add(ctx, owner, "ConfigMap "+cm.Name, d)
	})
	if err != nil {
		return fmt.Errorf("listing the ConfigMaps of the %s records: %w", s.name, err)
	}
	for _, name := range orphans {
		err := s.configMaps.ConfigMaps(s.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			// Deleted at the next Load; it holds no record of a live VPA.
			logger.Error(err, "Deleting the records of a VPA that is gone", "configMap", klog.KRef(s.cfg.Namespace, name))
		}
	}
	s.mem.replace(l.loaded)
	s.mu.Lock()
	s.owners = l.owners
	s.written = written
	s.migrate = migrate
	s.earlier = earlier
	s.mu.Unlock()
	for id := range l.rewrite {
		s.queue.Add(id)
	}
	for id := range migrate {
		s.queue.Add(id)
	}
	logger.Info("Loaded records", "store", s.name, "records", len(l.loaded), "vpas", len(live), "dropped", l.dropped,
		"migrating", len(migrate), "moving", len(earlier), "orphansDeleted", len(orphans))
	return nil
}

// serves tells whether the store serves the VPAs of namespace (Serves).
func (s *ConfigMapStore) serves(namespace string) bool {
	return s.cfg.Serves == nil || s.cfg.Serves(namespace)
}

// listConfigMaps calls visit for each ConfigMap of the store, in pages.
func (s *ConfigMapStore) listConfigMaps(ctx context.Context, visit func(*corev1.ConfigMap)) error {
	opts := metav1.ListOptions{
		Limit:         loadPageSize,
		LabelSelector: labels.Set{LabelStore: s.cfg.Store}.String(),
	}
	for {
		list, err := s.configMaps.ConfigMaps(s.cfg.Namespace).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			visit(&list.Items[i])
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}
