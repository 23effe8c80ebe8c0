package records

// How a ConfigMapStore writes a VPA's ConfigMap, and reads it again when
// another writer changed it.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// write brings the ConfigMap of one VPA up to date with the records held,
// then removes the VPA's records annotation if it is still to be migrated.
func (s *ConfigMapStore) write(ctx context.Context, id string) error {
	s.mu.Lock()
	forgotten := s.forgotten[id]
	migrating, migrate := s.migrate[id]
	s.mu.Unlock()
	if forgotten {
		if err := s.forget(ctx, id); err != nil {
			return err
		}
		return s.deleteEarlier(ctx, id)
	}
	if err := s.writeConfigMap(ctx, id); err != nil {
		return err
	}
	if err := s.deleteEarlier(ctx, id); err != nil {
		return err
	}
	if !migrate {
		return nil
	}
	patch, err := annotationPatch(s.cfg.AnnotationKey, migrating.UID, "")
	if err != nil {
		return err
	}
	_, err = s.vpas.VerticalPodAutoscalers(migrating.Namespace).Patch(ctx, migrating.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !gone(err) {
		s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
		return fmt.Errorf("removing the annotation %s of VPA %s: %w", s.cfg.AnnotationKey, migrating.Key(), err)
	}
	s.mu.Lock()
	if s.migrate[id] == migrating {
		delete(s.migrate, id)
	}
	s.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Moved records from the VPA's annotation to a ConfigMap", "vpa", migrating.Key(), "store", s.name)
	return nil
}

// writeConfigMap writes, or deletes, the ConfigMap of one VPA so that it
// holds the records held. Every write is conditional on the
// resourceVersion this store last read or wrote: one refused because
// another writer changed the ConfigMap (a deposed leader's last write, on
// its way while this one loaded) makes the store read it again, merge the
// two writers' records (reread), and write again once.
func (s *ConfigMapStore) writeConfigMap(ctx context.Context, id string) error {
	logger := klog.FromContext(ctx)
	for attempt := 0; ; attempt++ {
		records := s.mem.byOwner(id)
		value, left, err := EncodeCompact(records, s.cfg.MaxBytes)
		if err != nil {
			return err
		}
		s.setLeftOut(id, len(left))
		s.mu.Lock()
		owner, known := s.owners[id]
		last, wrote := s.written[id]
		s.mu.Unlock()
		switch {
		case value == "" && !wrote, wrote && last.value == value:
			return nil
		case value == "":
			owner = last.owner
			err = s.deleteConfigMap(ctx, id, last, true)
		case !known:
			return nil // records put for a VPA forgotten meanwhile: nowhere to go
		default:
			// Written only for the VPA the cache holds under that name and
			// UID: a record put while its VPA was deleted (by a worker that
			// resolved it just before) creates no ConfigMap that nothing
			// would delete. A VPA the cache has not seen yet has no records
			// but those Load read, which its ConfigMap holds.
			vpa, lerr := s.lister.VerticalPodAutoscalers(owner.Namespace).Get(owner.Name)
			if lerr != nil || owner.UID != "" && vpa.UID != owner.UID {
				logger.V(2).Info("VPA not in the cache; its records are held in memory only", "vpa", owner.Key(), "vpaUID", owner.UID, "store", s.name)
				return nil
			}
			owner.UID = vpa.UID
			err = s.putConfigMap(ctx, id, owner, value, last, wrote)
			if err == nil {
				logger.V(4).Info("Wrote records", "vpa", owner.Key(), "store", s.name, "records", len(records)-len(left), "bytes", len(value))
				if len(left) > 0 {
					logger.Info("Records left out of the ConfigMap to keep it within its bounds; they are held in memory only",
						"vpa", owner.Key(), "store", s.name, "leftOut", len(left), "maxBytes", s.cfg.MaxBytes,
						"maxRecords", MaxCompactEntries, "maxAttempts", MaxCompactAttempts)
				}
			}
		}
		if err == nil {
			return nil
		}
		if attempt > 0 || ctx.Err() != nil || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
			return err
		}
		if err := s.reread(ctx, id, owner); err != nil {
			s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
			return err
		}
	}
}

// reread reads the ConfigMap of owner after another writer changed it (a
// deposed leader's last write, on its way while this store loaded) and
// merges it with the records held: of each pod, the newest record of the
// two writers is held from now on, and a record this store forgot since it
// last read or wrote the ConfigMap stays forgotten. The records taken are
// told to OnMerged's function.
func (s *ConfigMapStore) reread(ctx context.Context, id string, owner Owner) error {
	name := s.configMapName(owner.UID)
	cm, err := s.configMaps.ConfigMaps(s.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.mu.Lock()
		delete(s.written, id)
		s.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s of VPA %s, changed by another writer: %w", s.cfg.Namespace, name, owner.Key(), err)
	}
	var now time.Time
	if s.cfg.Now != nil {
		now = s.cfg.Now()
	}
	value := cm.Data[ConfigMapDataKey]
	d, _ := DecodeCompact(value, decodeOptions(owner, now, s.cfg.Live, s.cfg.MaxBytes))
	if d.DroppedTotal() > 0 {
		for reason, n := range d.Dropped {
			s.cfg.Metrics.recordsDropped(s.name, reason, n)
		}
		klog.FromContext(ctx).Info("Dropped records", "vpa", owner.Key(), "vpaUID", owner.UID, "store", s.name,
			"source", "ConfigMap "+name+", changed by another writer", "dropped", d.Dropped, "kept", len(d.Records))
	}
	s.mu.Lock()
	last := s.written[id]
	s.written[id] = writtenConfigMap{owner: owner, value: value, resourceVersion: cm.ResourceVersion}
	merged := s.merged
	s.mu.Unlock()
	// What this store last read or wrote: the base of the merge. It was
	// bounded and checked when it was read or written.
	base, _ := DecodeCompact(last.value, DecodeOptions{MaxBytes: s.cfg.MaxBytes})
	taken := s.mem.merge(owner, d.Records, base.Records)
	klog.FromContext(ctx).Info("Records ConfigMap changed by another writer; read again", "vpa", owner.Key(), "store", s.name,
		"configMap", klog.KObj(cm), "recordsTaken", len(taken))
	if len(taken) > 0 && merged != nil {
		merged(owner, taken)
	}
	return nil
}

// forget deletes the ConfigMap of a VPA that is gone, with the records a
// worker put for it after ForgetOwner (one that resolved the VPA just
// before it went).
func (s *ConfigMapStore) forget(ctx context.Context, id string) error {
	s.mem.forget(id)
	s.setLeftOut(id, 0)
	s.mu.Lock()
	delete(s.owners, id)
	last, wrote := s.written[id]
	s.mu.Unlock()
	if wrote {
		// Whatever it holds: its VPA is gone.
		if err := s.deleteConfigMap(ctx, id, last, false); err != nil {
			s.cfg.Metrics.writeFailed(s.name, writeFailure(err))
			return err
		}
	}
	s.mu.Lock()
	delete(s.forgotten, id)
	s.mu.Unlock()
	return nil
}

// putConfigMap writes the ConfigMap of owner (of that id): an update
// conditional on the resourceVersion last read or written, or a create when
// this store knows of none (refused when one exists).
func (s *ConfigMapStore) putConfigMap(ctx context.Context, id string, owner Owner, value string, last writtenConfigMap, wrote bool) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      s.configMapName(owner.UID),
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
	if s.cfg.Owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{*s.cfg.Owner}
	}
	client := s.configMaps.ConfigMaps(s.cfg.Namespace)
	var got *corev1.ConfigMap
	var err error
	if wrote {
		cm.ResourceVersion = last.resourceVersion
		got, err = client.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			// Deleted meanwhile (by another leader's Load, or by hand).
			cm.ResourceVersion = ""
			got, err = client.Create(ctx, cm, metav1.CreateOptions{})
		}
	} else {
		got, err = client.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing the records of VPA %s into ConfigMap %s/%s: %w", owner.Key(), cm.Namespace, cm.Name, err)
	}
	s.mu.Lock()
	s.written[id] = writtenConfigMap{owner: owner, value: value, resourceVersion: got.ResourceVersion}
	s.mu.Unlock()
	return nil
}

// deleteConfigMap deletes the ConfigMap last written for the VPA of that
// id, only if no one changed it since when conditional.
func (s *ConfigMapStore) deleteConfigMap(ctx context.Context, id string, last writtenConfigMap, conditional bool) error {
	if last.owner.UID != "" {
		name := s.configMapName(last.owner.UID)
		opts := metav1.DeleteOptions{}
		if conditional && last.resourceVersion != "" {
			opts.Preconditions = &metav1.Preconditions{ResourceVersion: &last.resourceVersion}
		}
		err := s.configMaps.ConfigMaps(s.cfg.Namespace).Delete(ctx, name, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ConfigMap %s/%s of VPA %s: %w", s.cfg.Namespace, name, s.vpaOf(id), err)
		}
	}
	s.mu.Lock()
	if w, ok := s.written[id]; ok && w.owner.UID == last.owner.UID {
		delete(s.written, id)
	}
	s.mu.Unlock()
	return nil
}
