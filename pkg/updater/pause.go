package updater

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
)

// The kill switch. Both stop resize patches at once, without a redeploy;
// decisions, records, events, metrics and the VPA condition go on, so that
// what would happen stays visible. Pods are never evicted either way.
//
// Two gates of the pod path (gates.go) withhold resizes: the emergency brake
// (the cluster-wide switch, --dry-run) every resize, a revert after harm
// included; the VPA's pause and its freezes (windows.go) every change but a
// revert: undoing harm is not a change in time. A revert the brake holds
// stays due (its record), the condition says it waits for the switch, and
// the switch's change queues every pod again (onConfigMap).
const (
	// PausedAnnotation, set to "true" on a VPA, pauses the resizing of its
	// pods.
	PausedAnnotation = "vpa-inplace.dev/paused"
	// PausedKey, set to "true" in the updater's ConfigMap
	// (--config-map), pauses resizing cluster-wide.
	PausedKey = "paused"
)

// Reasons of withheld resizes (metric label).
const (
	withheldDryRun        = "DryRun"
	withheldVPAPaused     = "VPAPaused"
	withheldClusterPaused = "ClusterPaused"
)

// clusterPaused tells whether the ConfigMap pauses resizing cluster-wide,
// and why. A value that is not a boolean pauses: a kill switch errs on the
// side of stopping.
func (c *Controller) clusterPaused() (bool, string) {
	if c.configMaps == nil {
		return false, ""
	}
	obj, exists, err := c.configMaps.GetByKey(c.configMapKey)
	if err != nil {
		return true, fmt.Sprintf("ConfigMap %s cannot be read (%v)", c.cfg.ConfigMap, err)
	}
	if !exists {
		return false, ""
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return true, fmt.Sprintf("ConfigMap %s cannot be read (its cache holds a %T)", c.cfg.ConfigMap, obj)
	}
	value, ok := cm.Data[PausedKey]
	if !ok {
		return false, ""
	}
	return switchOn(value, fmt.Sprintf("cluster-wide by ConfigMap %s (%s: %q)", c.cfg.ConfigMap, PausedKey, value))
}

// vpaPaused tells whether a VPA's annotation pauses its pods, and why.
func vpaPaused(vpa *vpatypes.VerticalPodAutoscaler) (bool, string) {
	value, ok := vpa.Annotations[PausedAnnotation]
	if !ok {
		return false, ""
	}
	return switchOn(value, fmt.Sprintf("by annotation %s=%q on the VPA", PausedAnnotation, value))
}

func switchOn(value, where string) (bool, string) {
	on, err := strconv.ParseBool(strings.TrimSpace(value))
	if err != nil {
		return true, where + ", not a boolean: treated as paused"
	}
	if !on {
		return false, ""
	}
	return true, where
}

// withheld tells whether resizes of vpa's pods are to be withheld: the
// metric reason and a sentence for events and the condition; "" when they
// may be sent.
func (c *Controller) withheld(vpa *vpatypes.VerticalPodAutoscaler) (reason, why string) {
	if on, why := c.clusterPaused(); on {
		return withheldClusterPaused, "resizing is paused " + why
	}
	if on, why := vpaPaused(vpa); on {
		return withheldVPAPaused, "resizing is paused " + why
	}
	if on, why := c.frozen(vpa); on {
		return withheldFrozen, why
	}
	if c.cfg.DryRun {
		return withheldDryRun, "the updater runs with --dry-run"
	}
	return "", ""
}

// pausedWhy is the pause part of withheld: "" when not paused.
func (c *Controller) pausedWhy(vpa *vpatypes.VerticalPodAutoscaler) string {
	reason, why := c.withheld(vpa)
	if reason == withheldDryRun {
		return ""
	}
	return why
}

// brakeGate is the emergency brake: the cluster-wide kill switch and
// --dry-run withhold every resize, a revert's included.
type brakeGate struct{ c *Controller }

func (brakeGate) Name() string { return "kill switch" }

func (brakeGate) Scope() gate.Scope { return gate.Changes | gate.Boosts | gate.Reverts }

func (g brakeGate) Admit(context.Context, *attempt) gate.Verdict {
	if on, why := g.c.clusterPaused(); on {
		return gate.Verdict{Answer: gate.Refuse, Reason: withheldClusterPaused, Why: "resizing is paused " + why}
	}
	if g.c.cfg.DryRun {
		return gate.Verdict{Answer: gate.Refuse, Reason: withheldDryRun, Why: "the updater runs with --dry-run"}
	}
	return passed
}

func (brakeGate) Release(context.Context, *attempt, gate.Outcome) {}

// pauseGate withholds the changes of a VPA paused by its annotation, or
// frozen (freeze-until on it or its namespace, or a window annotation that
// cannot be read): every change but a revert. A freeze tells when it ends.
type pauseGate struct{ c *Controller }

func (pauseGate) Name() string { return "pause" }

func (pauseGate) Scope() gate.Scope { return gate.Changes | gate.Boosts }

func (g pauseGate) Admit(_ context.Context, a *attempt) gate.Verdict {
	if on, why := vpaPaused(a.vpa); on {
		return gate.Verdict{Answer: gate.Refuse, Reason: withheldVPAPaused, Why: "resizing is paused " + why}
	}
	if on, why, until := g.c.freeze(a.vpa); on {
		return gate.Verdict{Answer: gate.Refuse, Reason: withheldFrozen, Why: why, Until: until}
	}
	return passed
}

func (pauseGate) Release(context.Context, *attempt, gate.Outcome) {}
