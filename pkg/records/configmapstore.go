package records

import (
	"context"
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
	"k8s.io/client-go/tools/cache"
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
// The ConfigMap of a VPA is named after its UID (ConfigMapName), so that a
// new VPA of the same name never inherits records; it carries the VPA's
// namespace, name and UID in annotations. Tenants cannot write it (it is
// not in their namespaces); it is still decoded defensively, and a record
// is kept only for a pod or Job the VPA owns.
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

	// Guarded by mu.
	// written is what the ConfigMap of each VPA holds, as last written or
	// read by Load.
	written map[string]writtenConfigMap
	// migrate holds the VPAs whose records annotation is still to be
	// removed, once their records are in their ConfigMap.
	migrate map[string]types.UID
}

type writtenConfigMap struct {
	uid   types.UID
	value string
}

var _ Store = (*ConfigMapStore)(nil)

// ConfigMapStoreConfig configures a ConfigMapStore.
type ConfigMapStoreConfig struct {
	// Namespace holds the ConfigMaps: the updater's own. Required.
	Namespace string
	// Store names the store in the ConfigMaps' names and labels, in logs
	// and in the store label of the metrics: StoreInfeasible or
	// StoreMemory.
	Store string
	// AnnotationKey is the VPA annotation the records are migrated from:
	// AnnotationKey or MemoryAnnotationKey.
	AnnotationKey string
	// VPANamespace limits Load to the VPAs of one namespace, and to their
	// ConfigMaps; empty: all.
	VPANamespace string
	// IgnoredNamespaces are namespaces whose VPAs this updater does not
	// serve: their records and ConfigMaps are left to the updater that does.
	IgnoredNamespaces []string
	// MaxBytes bounds each ConfigMap's value; 0 means
	// DefaultMaxCompactBytes.
	MaxBytes int
	// Owns, Metrics, LoadTimeout and Now are as in VPAStoreConfig.
	Owns        func(owner Owner, uid types.UID) bool
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
// for the VPA of that UID.
func ConfigMapName(store string, vpaUID types.UID) string {
	return "vpa-inplace-records-" + store + "-" + string(vpaUID)
}

// NewConfigMapStore returns an empty store writing ConfigMaps through
// configMaps and migrating from the VPAs' annotations through vpas; lister
// tells the UID of a VPA records were put for without one.
func NewConfigMapStore(configMaps corev1client.ConfigMapsGetter, vpas vpaclient.VerticalPodAutoscalersGetter,
	lister vpalisters.VerticalPodAutoscalerLister, cfg ConfigMapStoreConfig) (*ConfigMapStore, error) {
	if cfg.Namespace == "" {
		return nil, fmt.Errorf("records store %q: no namespace for its ConfigMaps", cfg.Store)
	}
	if errs := validation.IsDNS1123Label(cfg.Store); len(errs) > 0 {
		return nil, fmt.Errorf("records store %q: %v", cfg.Store, errs)
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
		migrate:    map[string]types.UID{},
	}
	s.durable = newDurable(cfg.Store, s.write)
	return s, nil
}

// ForgetOwner implements Store. The VPA is gone; its ConfigMap is deleted
// by the write this queues.
func (s *ConfigMapStore) ForgetOwner(owner Owner) int {
	key := owner.Key()
	s.mu.Lock()
	delete(s.owners, key)
	delete(s.migrate, key)
	s.mu.Unlock()
	n := s.mem.ForgetOwner(owner)
	s.queue.Add(key)
	return n
}

// Load implements Store: it lists the VPAs and the store's ConfigMaps from
// the API server (consistent reads, in pages, within cfg.LoadTimeout),
// keeps the well-formed records of each ConfigMap whose VPA still exists
// and owns their pods, deletes the ConfigMaps of VPAs that are gone, and
// reads the records annotations left by VPAStore for migration.
func (s *ConfigMapStore) Load(ctx context.Context) error {
	return s.loadWith(ctx, s.cfg.LoadTimeout, s.cfg.Now, s.load)
}

func (s *ConfigMapStore) load(ctx context.Context, now time.Time) error {
	logger := klog.FromContext(ctx)
	l := newLoading(s.cfg.Metrics, s.name)
	live := map[types.UID]Owner{}
	migrate := map[string]types.UID{}
	ignored := sets.New(s.cfg.IgnoredNamespaces...)
	err := listVPAs(ctx, s.vpas, s.cfg.VPANamespace, func(owner Owner, annotations map[string]string) {
		if ignored.Has(owner.Namespace) {
			return
		}
		live[owner.UID] = owner
		value, ok := annotations[s.cfg.AnnotationKey]
		if !ok {
			return
		}
		migrate[owner.Key()] = owner.UID
		d, _ := DecodeAnnotation(value, decodeOptions(owner, now, s.cfg.Owns, DefaultMaxAnnotationBytes))
		l.add(ctx, owner, "annotation "+s.cfg.AnnotationKey, d)
	})
	if err != nil {
		return fmt.Errorf("listing VPAs to load the %s records: %w", s.name, err)
	}
	written := map[string]writtenConfigMap{}
	var orphans []string
	err = s.listConfigMaps(ctx, func(cm *corev1.ConfigMap) {
		uid := types.UID(cm.Annotations[AnnotationVPAUID])
		owner, ok := live[uid]
		switch {
		case ok && cm.Name == ConfigMapName(s.cfg.Store, uid):
		case ignored.Has(cm.Annotations[AnnotationVPANamespace]):
			return // served by another updater
		case s.cfg.VPANamespace == "" || cm.Annotations[AnnotationVPANamespace] == s.cfg.VPANamespace:
			// Its VPA is gone (or it names none): its records hold
			// nothing any more.
			orphans = append(orphans, cm.Name)
			return
		default:
			return // a VPA of a namespace this updater does not serve
		}
		value := cm.Data[ConfigMapDataKey]
		written[owner.Key()] = writtenConfigMap{uid: uid, value: value}
		d, _ := DecodeCompact(value, decodeOptions(owner, now, s.cfg.Owns, s.cfg.MaxBytes))
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
	s.mu.Unlock()
	for key := range l.rewrite {
		s.queue.Add(key)
	}
	for key := range migrate {
		s.queue.Add(key)
	}
	logger.Info("Loaded records", "store", s.name, "records", len(l.loaded), "vpas", len(live), "dropped", l.dropped,
		"migrating", len(migrate), "orphansDeleted", len(orphans))
	return nil
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

// write brings the ConfigMap of one VPA up to date with the records held,
// then removes the VPA's records annotation if it is still to be migrated.
func (s *ConfigMapStore) write(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	records := s.mem.byOwner(key)
	value, left, err := EncodeCompact(records, s.cfg.MaxBytes)
	if err != nil {
		return err
	}
	s.mu.Lock()
	uid := s.owners[key]
	last, wrote := s.written[key]
	migrateUID, migrating := s.migrate[key]
	s.mu.Unlock()
	if uid == "" && value != "" {
		if vpa, err := s.lister.VerticalPodAutoscalers(namespace).Get(name); err == nil {
			uid = vpa.UID
		}
	}

	logger := klog.FromContext(ctx)
	// The ConfigMap of an older VPA of the same name goes first; so does
	// the ConfigMap of a VPA that is gone (ForgetOwner).
	if wrote && last.uid != uid && (uid != "" || value == "") {
		if err := s.deleteConfigMap(ctx, key, last.uid); err != nil {
			return err
		}
		wrote = false
	}
	switch {
	case value == "" && wrote:
		if err := s.deleteConfigMap(ctx, key, uid); err != nil {
			return err
		}
	case value == "" || wrote && last.value == value:
	case uid == "":
		logger.V(2).Info("VPA unknown; its records are held in memory only", "vpa", key, "store", s.name)
	default:
		if err := s.putConfigMap(ctx, Owner{Namespace: namespace, Name: name, UID: uid}, value); err != nil {
			s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
			return err
		}
		logger.V(4).Info("Wrote records", "vpa", key, "store", s.name, "records", len(records)-len(left), "bytes", len(value))
		if len(left) > 0 {
			logger.Info("Records left out of the ConfigMap to keep it within its bounds; they are held in memory only",
				"vpa", key, "store", s.name, "leftOut", len(left), "maxBytes", s.cfg.MaxBytes,
				"maxRecords", MaxCompactEntries, "maxAttempts", MaxCompactAttempts)
		}
	}
	if !migrating {
		return nil
	}
	patch, err := annotationPatch(s.cfg.AnnotationKey, migrateUID, "")
	if err != nil {
		return err
	}
	_, err = s.vpas.VerticalPodAutoscalers(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !gone(err) {
		s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
		return fmt.Errorf("removing the annotation %s of VPA %s: %w", s.cfg.AnnotationKey, key, err)
	}
	s.mu.Lock()
	if s.migrate[key] == migrateUID {
		delete(s.migrate, key)
	}
	s.mu.Unlock()
	logger.V(2).Info("Moved records from the VPA's annotation to a ConfigMap", "vpa", key, "store", s.name)
	return nil
}

// putConfigMap replaces the ConfigMap of owner, creating it when missing.
// Only the leader writes these ConfigMaps: the update is unconditional.
func (s *ConfigMapStore) putConfigMap(ctx context.Context, owner Owner, value string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ConfigMapName(s.cfg.Store, owner.UID),
			Namespace: s.cfg.Namespace,
			Labels:    map[string]string{LabelStore: s.cfg.Store, "app.kubernetes.io/managed-by": managedBy},
			Annotations: map[string]string{
				AnnotationVPANamespace: owner.Namespace,
				AnnotationVPAName:      owner.Name,
				AnnotationVPAUID:       string(owner.UID),
			},
		},
		Data: map[string]string{ConfigMapDataKey: value},
	}
	client := s.configMaps.ConfigMaps(s.cfg.Namespace)
	_, err := client.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing the records of VPA %s into ConfigMap %s/%s: %w", owner.Key(), cm.Namespace, cm.Name, err)
	}
	s.mu.Lock()
	s.written[owner.Key()] = writtenConfigMap{uid: owner.UID, value: value}
	s.mu.Unlock()
	return nil
}

// deleteConfigMap deletes the ConfigMap of the VPA of that UID.
func (s *ConfigMapStore) deleteConfigMap(ctx context.Context, key string, uid types.UID) error {
	if uid != "" {
		name := ConfigMapName(s.cfg.Store, uid)
		err := s.configMaps.ConfigMaps(s.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
			return fmt.Errorf("deleting ConfigMap %s/%s of VPA %s: %w", s.cfg.Namespace, name, key, err)
		}
	}
	s.mu.Lock()
	if w, ok := s.written[key]; ok && w.uid == uid {
		delete(s.written, key)
	}
	s.mu.Unlock()
	return nil
}
