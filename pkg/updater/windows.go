package updater

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	uwindow "github.com/vpa-inplace/vpa-inplace/pkg/updater/window"
)

// Resize windows and freezes on VPAs and their namespaces
// (pkg/updater/window reads them): the pod path gives Decide the VPA's
// windows (windowGate), a freeze withholds every change but a revert as a
// pause does (pauseGate, pause.go), and the pod is decided again when the
// freeze ends or the window opens (Decision.RecheckAfter), on the injected
// clock: nothing polls.

// withheldFrozen is the metric reason of a resize withheld by a freeze.
const withheldFrozen = "Frozen"

// windowsFor returns vpa's resize windows at now for pod's decision. It
// reports an annotation that cannot be read (a warning event on the VPA,
// once per value) and decides the pod again when a freeze ends.
func (c *Controller) windowsFor(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, now time.Time) resize.Windows {
	v := c.windows.For(vpa, now)
	switch {
	case v.Invalid:
		if c.windows.FirstReport(vpa.UID, v.Why) {
			klog.FromContext(ctx).Info("Resize window or freeze annotation invalid; the VPA is frozen until it is corrected", "vpa", klog.KObj(vpa), "why", v.Why)
			c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventResizeWindowInvalid, "Resizes of the VPA's pods are %s", v.Why)
		}
	default:
		c.windows.FirstReport(vpa.UID, "")
	}
	if v.Frozen && !v.FrozenUntil.IsZero() {
		// The condition says the VPA is frozen until then, also when no
		// pod of it changes state as the freeze ends. A resize the freeze
		// withholds is decided again then (gate.Verdict.Until).
		c.statusQueue.AddAfter(vpaKey(vpa), max(v.FrozenUntil.Sub(now), time.Second))
	}
	return v.Windows
}

// windowGate gives the decision the VPA's resize windows (pkg/resize's
// holdBack): decreases and restarts wait for a window, every change under
// the scope all.
type windowGate struct{ c *Controller }

func (windowGate) Name() string { return "resize windows" }

func (windowGate) Scope() gate.Scope { return gate.Decreases | gate.Restarts }

func (g windowGate) Hold(ctx context.Context, a *attempt) {
	a.in.Windows = g.c.windowsFor(ctx, a.pod, a.vpa, a.in.Now)
}

// frozen tells whether a freeze (or an annotation that cannot be read)
// stops the resizes of vpa's pods now, and why.
func (c *Controller) frozen(vpa *vpatypes.VerticalPodAutoscaler) (bool, string) {
	on, why, _ := c.freeze(vpa)
	return on, why
}

// freeze is frozen, with when the freeze ends (zero: when an annotation is
// corrected).
func (c *Controller) freeze(vpa *vpatypes.VerticalPodAutoscaler) (bool, string, time.Time) {
	if c.windows == nil {
		return false, "", time.Time{}
	}
	v := c.windows.For(vpa, c.now())
	if !v.Frozen {
		return false, "", time.Time{}
	}
	return true, "resizing is " + v.Why, v.FrozenUntil
}

// watchNamespaces builds the Gate, reading the namespaces' annotations
// through informer (nil: the VPAs' only), and queues the VPAs of a
// namespace whose windows or freeze change.
func (c *Controller) watchNamespaces(informer coreinformers.NamespaceInformer) error {
	var lister corelisters.NamespaceLister
	if informer != nil {
		lister = informer.Lister()
		// Fail closed: no resize before the namespaces' freezes are read.
		c.synced = append(c.synced, informer.Informer().HasSynced)
		if err := c.handle(informer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onNamespace(nil, obj) },
			UpdateFunc: c.onNamespace,
		}); err != nil {
			return fmt.Errorf("adding namespace handler: %w", err)
		}
	}
	c.windows = uwindow.New(uwindow.Config{MaxFreeze: c.cfg.MaxFreeze}, lister)
	return nil
}

// onNamespace queues the InPlace VPAs of a namespace whose resize-window,
// scope or freeze annotations changed (a namespace first seen with one
// counts as changed). Their pods follow (syncVPA).
func (c *Controller) onNamespace(oldObj, obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || c.ignored.Has(ns.Name) {
		return
	}
	var before map[string]string
	if old, ok := oldObj.(*corev1.Namespace); ok {
		before = old.Annotations
	}
	if !uwindow.Changed(before, ns.Annotations) {
		return
	}
	vpas, err := c.vpas.VerticalPodAutoscalers(ns.Name).List(labels.Everything())
	if err != nil {
		return
	}
	for _, vpa := range vpas {
		if isInPlace(vpa) {
			c.vpaQueue.Add(vpaKey(vpa))
		}
	}
}
