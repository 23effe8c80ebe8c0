package admission

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// HoldReader tells the hold after harm of a VPA (records.KindHarmHold),
// if it has one, whether it still stands or not.
type HoldReader interface {
	HoldOf(vpa *vpatypes.VerticalPodAutoscaler) (*records.Record, bool)
}

var _ HoldReader = (*Holds)(nil)

// Holds reads the holds after harm the updater keeps in its safety records
// (records.StoreSafety): one ConfigMap per VPA in the records namespace,
// labelled vpa-inplace.dev/records=safety, named after the updater's
// records prefix and the VPA's UID. Its informer lists and watches that
// namespace and label only (HoldsSelector), and keeps of each ConfigMap of
// that prefix its hold alone (HoldsTransform): a few hundred bytes per VPA
// with a hold, whatever canaries and reverts the ConfigMap holds.
//
// A hold is believed only for the VPA the ConfigMap's name and
// annotations name, of the same namespace, name and UID, and only from
// the ConfigMaps of the prefix the admission controller is given (the
// updater's --records-prefix): tenants cannot write the records
// namespace, an admin's mistake there gives no VPA another's hold, and
// another install's records in the same namespace are its own.
type Holds struct {
	logger klog.Logger
	// synced tells whether the informer's first list has reached the
	// handler: the informer's own HasSynced says only that its store
	// has it, and HoldOf reads byVPA.
	synced cache.InformerSynced
	mu     sync.RWMutex
	byVPA  map[types.UID]heldFor
}

// heldFor is the hold of one VPA, and the VPA its ConfigMap names.
type heldFor struct {
	namespace, name string
	hold            *records.Record
}

// holdErrorKey is the data key under which HoldsTransform leaves why a
// ConfigMap's hold could not be read, for Holds to log.
const holdErrorKey = "error"

// HoldsSelector is the label selector of the informer of Holds: the
// safety records' ConfigMaps.
func HoldsSelector() string {
	return labels.Set{records.LabelStore: records.StoreSafety}.String()
}

// NewHolds returns Holds over an informer of the records namespace's
// ConfigMaps, listed with HoldsSelector and trimmed by HoldsTransform.
// Call it before starting the informer.
func NewHolds(logger klog.Logger, informer cache.SharedIndexInformer) (*Holds, error) {
	h := &Holds{logger: logger, byVPA: map[types.UID]heldFor{}}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.set,
		UpdateFunc: func(_, obj any) { h.set(obj) },
		DeleteFunc: h.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("watching the safety records: %w", err)
	}
	h.synced = reg.HasSynced
	return h, nil
}

// HasSynced tells whether every hold of the informer's first list is
// known: wait for it, not only for the informer, before answering
// admission requests.
func (h *Holds) HasSynced() bool {
	return h != nil && h.synced != nil && h.synced()
}

// HoldOf implements HoldReader.
func (h *Holds) HoldOf(vpa *vpatypes.VerticalPodAutoscaler) (*records.Record, bool) {
	if h == nil || vpa == nil {
		return nil, false
	}
	h.mu.RLock()
	held, ok := h.byVPA[vpa.UID]
	h.mu.RUnlock()
	if !ok || held.namespace != vpa.Namespace || held.name != vpa.Name {
		return nil, false
	}
	return held.hold, true
}

func (h *Holds) set(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	uid := types.UID(cm.Annotations[records.AnnotationVPAUID])
	if why, bad := cm.Data[holdErrorKey]; bad {
		h.logger.Info("Hold after harm not read from a records ConfigMap", "configMap", klog.KObj(cm), "err", why)
	}
	held, ok := holdIn(cm)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		delete(h.byVPA, uid)
		return
	}
	h.byVPA[uid] = held
}

func (h *Holds) forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		h.mu.Lock()
		delete(h.byVPA, types.UID(cm.Annotations[records.AnnotationVPAUID]))
		h.mu.Unlock()
	}
}

// holdIn reads the hold of a ConfigMap HoldsTransform trimmed.
func holdIn(cm *corev1.ConfigMap) (heldFor, bool) {
	uid := types.UID(cm.Annotations[records.AnnotationVPAUID])
	value, ok := cm.Data[records.ConfigMapDataKey]
	if !ok || uid == "" {
		return heldFor{}, false
	}
	d, err := records.DecodeCompact(value, records.DecodeOptions{MaxBytes: maxHoldBytes, MaxEntries: 1, MaxAttempts: 1})
	r, ok := d.Records[uid]
	if err != nil || !ok || r.Kind != records.KindHarmHold {
		return heldFor{}, false
	}
	return heldFor{namespace: cm.Annotations[records.AnnotationVPANamespace], name: cm.Annotations[records.AnnotationVPAName], hold: r}, true
}

// maxHoldBytes bounds the value of one hold, as HoldsTransform writes it:
// 32 containers of four values, twice, and a message.
const maxHoldBytes = 16 << 10

// HoldsTransform returns the transform of Holds' informer, for the
// records of prefix (the updater's --records-prefix): of a safety records
// ConfigMap whose name is the one of prefix for the VPA its annotations
// name, it keeps the name, the namespace, the resourceVersion, those
// annotations and the VPA's hold (records.KindHarmHold, keyed by the VPA's
// UID), read within the records' bounds (records.DecodeCompact) and
// written again alone; of any other, another install's included, nothing
// but its name. Why a hold could not be read is kept under holdErrorKey.
// Tombstones are left as they are.
func HoldsTransform(prefix string) cache.TransformFunc {
	return func(obj any) (any, error) { return holdsTransform(prefix, obj) }
}

func holdsTransform(prefix string, obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID, ResourceVersion: cm.ResourceVersion,
	}}
	uid := types.UID(cm.Annotations[records.AnnotationVPAUID])
	if uid == "" || cm.Name != records.ConfigMapNameWithPrefix(prefix, records.StoreSafety, uid) ||
		cm.Labels[records.LabelStore] != records.StoreSafety {
		return out, nil
	}
	out.Annotations = map[string]string{
		records.AnnotationVPAUID:       string(uid),
		records.AnnotationVPANamespace: cm.Annotations[records.AnnotationVPANamespace],
		records.AnnotationVPAName:      cm.Annotations[records.AnnotationVPAName],
	}
	d, err := records.DecodeCompact(cm.Data[records.ConfigMapDataKey], records.DecodeOptions{
		Keep: func(u types.UID) bool { return u == uid },
	})
	if err != nil {
		out.Data = map[string]string{holdErrorKey: err.Error()}
		return out, nil
	}
	hold, ok := d.Records[uid]
	if !ok || hold.Kind != records.KindHarmHold {
		return out, nil
	}
	value, left, err := records.EncodeCompact(map[types.UID]*records.Record{uid: hold}, maxHoldBytes)
	if err != nil || len(left) > 0 {
		out.Data = map[string]string{holdErrorKey: fmt.Sprintf("the hold of VPA %s does not fit in %d bytes", uid, maxHoldBytes)}
		return out, nil
	}
	out.Data = map[string]string{records.ConfigMapDataKey: value}
	return out, nil
}
