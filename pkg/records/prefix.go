package records

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// DefaultConfigMapPrefix begins the names of the records ConfigMaps when no
// prefix is set (--records-prefix): the name every install used before the
// prefix could be set, kept so that an existing install reads its records
// as they are.
const DefaultConfigMapPrefix = "vpa-inplace-records-"

// longestStore is the longest store name: what ValidatePrefix checks names
// with.
const longestStore = StoreInfeasible

// ValidatePrefix tells whether prefix can begin the records ConfigMaps'
// names: every name it gives (prefix, store, "-", a VPA's UID) must be a
// valid ConfigMap name.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("the records ConfigMaps' prefix is empty")
	}
	name := prefix + longestStore + "-00000000-0000-0000-0000-000000000000"
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("the records ConfigMaps' prefix %q gives names such as %q, which are no ConfigMap names: %s",
			prefix, name, strings.Join(errs, "; "))
	}
	return nil
}

// ConfigMapNameWithPrefix is the name of the ConfigMap holding the records
// of store for the VPA of that UID, for an install whose ConfigMaps' names
// begin with prefix.
func ConfigMapNameWithPrefix(prefix, store string, vpaUID types.UID) string {
	return prefix + store + "-" + string(vpaUID)
}

// configMapName is the name of this store's ConfigMap for the VPA of that
// UID.
func (s *ConfigMapStore) configMapName(vpaUID types.UID) string {
	return ConfigMapNameWithPrefix(s.cfg.Prefix, s.cfg.Store, vpaUID)
}

// ownedByAnother tells whether cm is owned by an object that is not this
// store's owner (cfg.Owner): another install's records (of a release whose
// names begin as this one's do, or of the earlier name), which this store
// neither reads nor deletes. Without an owner of its own, the store tells
// installs apart by name only.
func (s *ConfigMapStore) ownedByAnother(cm *corev1.ConfigMap) bool {
	if s.cfg.Owner == nil || len(cm.OwnerReferences) == 0 {
		return false
	}
	for _, ref := range cm.OwnerReferences {
		if ref.UID == s.cfg.Owner.UID {
			return false
		}
	}
	return true
}

// earlierName tells whether cm has the name this store's records had
// before the prefix was set (DefaultConfigMapPrefix), while its prefix is
// another.
func (s *ConfigMapStore) earlierName(cm *corev1.ConfigMap) bool {
	return s.cfg.Prefix != DefaultConfigMapPrefix &&
		strings.HasPrefix(cm.Name, ConfigMapNameWithPrefix(DefaultConfigMapPrefix, s.cfg.Store, ""))
}

// loadOthers is Load's look at a ConfigMap of the store's label before its
// own: it tells whether the ConfigMap is dealt with here, as one this store
// leaves alone, or as one of the earlier name it moves. Left alone: another
// install's (a name of another prefix, or an owner that is not this
// store's). Moved: one of the earlier name (DefaultConfigMapPrefix), while
// the prefix is another, of a VPA this store serves (live): its records are
// held as if read from the store's own ConfigMap, written under the store's
// name (the VPA is queued) and the earlier ConfigMap then deleted
// (deleteEarlier), as the VPAs' records annotations are moved into
// ConfigMaps. One of the earlier name whose VPA is gone is not dealt with
// here: Load deletes it as any other of a VPA that is gone.
func (s *ConfigMapStore) loadOthers(ctx context.Context, cm *corev1.ConfigMap, live map[types.UID]Owner, l *loading,
	earlier map[string]string, now time.Time) bool {
	own := strings.HasPrefix(cm.Name, ConfigMapNameWithPrefix(s.cfg.Prefix, s.cfg.Store, ""))
	old := !own && s.earlierName(cm)
	switch {
	case !own && !old, s.ownedByAnother(cm):
		return true
	case !old:
		return false
	}
	uid := types.UID(cm.Annotations[AnnotationVPAUID])
	owner, ok := live[uid]
	if !ok || cm.Name != ConfigMapNameWithPrefix(DefaultConfigMapPrefix, s.cfg.Store, uid) {
		return false
	}
	id := owner.id()
	earlier[id] = cm.Name
	l.rewrite[id] = true
	d, _ := DecodeCompact(cm.Data[ConfigMapDataKey], decodeOptions(owner, now, s.cfg.Live, s.cfg.MaxBytes))
	l.add(ctx, owner, "ConfigMap "+cm.Name+", of the earlier name", d)
	return true
}

// deleteEarlier deletes the ConfigMap of the earlier name Load read the
// records of the VPA of that id from, once they are written under the
// store's own name, or once there is nothing left to write (the VPA has no
// records, or is gone). Until then it keeps them for the next Load.
func (s *ConfigMapStore) deleteEarlier(ctx context.Context, id string) error {
	s.mu.Lock()
	name, moving := s.earlier[id]
	_, wrote := s.written[id]
	s.mu.Unlock()
	if !moving || !wrote && len(s.mem.byOwner(id)) > 0 {
		return nil
	}
	err := s.configMaps.ConfigMaps(s.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
		return fmt.Errorf("deleting ConfigMap %s/%s of the earlier name, once its records are moved: %w", s.cfg.Namespace, name, err)
	}
	s.mu.Lock()
	if s.earlier[id] == name {
		delete(s.earlier, id)
	}
	s.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Moved records to a ConfigMap of this install's name", "store", s.name,
		"from", klog.KRef(s.cfg.Namespace, name), "vpa", s.vpaOf(id))
	return nil
}
