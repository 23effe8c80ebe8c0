package updater

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// Config holds the updater's settings.
type Config struct {
	// Threshold is --pod-update-threshold.
	Threshold float64
	// EvictionTolerance is --eviction-tolerance: the fraction of a
	// workload's pods whose containers may be restarted by resizes at once.
	EvictionTolerance float64
	// RestartMinReady is --restart-min-ready: how long a pod restarted by a
	// resize must stay Ready before the next pod of its workload may go,
	// when the workload sets no minReadySeconds; 0 means 30s.
	RestartMinReady time.Duration
	// RestartReservationTimeout is --restart-reservation-timeout: how long a
	// resize that restarts containers keeps its place while its pod stays
	// Ready and the kubelet has not applied it, unless the pod still shows
	// it pending (Deferred, failing: kept while it does); 0 means 10m.
	RestartReservationTimeout time.Duration
	// ReversalHold is --resize-reversal-hold: how long after a resize a
	// change that only undoes it is held while the pod's requests stay
	// inside the recommended range; 0 holds nothing.
	ReversalHold time.Duration
	// DecreaseMinHistory is --decrease-min-history: how much usage history
	// a recommendation must rest on before a decrease inside its range is
	// sent (pkg/resize's evidence rule).
	DecreaseMinHistory time.Duration
	// RecommenderInterval is --recommender-interval: how often the
	// recommender writes its checkpoints; one last written more than two
	// of them ago proves nothing for a decrease. 0 means 1m.
	RecommenderInterval time.Duration
	// MaxFreeze is --max-freeze: how far ahead a freeze-until annotation
	// may end; 0 means window.DefaultMaxFreeze.
	MaxFreeze time.Duration
	// ResyncInterval is --updater-interval.
	ResyncInterval time.Duration
	// Workers is the number of concurrent workers.
	Workers int
	// IgnoredNamespaces are skipped.
	IgnoredNamespaces []string
	// ServerMinor is the API server's minor version, 0 when unknown.
	ServerMinor int
	// DryRun is --dry-run: decide and report, never send a resize.
	DryRun bool
	// DeferredWarningAfter is --deferred-warning-after: how long a resize may
	// stay Deferred before a warning event; 0 disables the warning.
	DeferredWarningAfter time.Duration
	// ConfigMap is the ConfigMap whose "paused" key pauses resizing
	// cluster-wide (read through Deps.ConfigMaps).
	ConfigMap types.NamespacedName
	// StatusMinInterval is the shortest time between two writes of one VPA's
	// condition; 0 means condition.DefaultMinInterval, a negative value no
	// limit.
	StatusMinInterval time.Duration
	// MemoryLimitMargin is --memory-limit-decrease-margin: with usage known,
	// a memory limit is lowered only above usage x (1 + margin).
	MemoryLimitMargin float64
	// ObservationWindow is --resize-observation-window: how long a pod is
	// watched after its resize completes; 0 means 10m. A VPA's annotation
	// may set its own (safety.go).
	ObservationWindow time.Duration
	// HarmHold is --harm-hold: how long values harm was seen at are held
	// for the VPA; 0 means 24h.
	HarmHold time.Duration
	// NotReadyGrace is --harm-not-ready-grace: how long a watched pod may
	// stay not Ready before it counts as harm; 0 means 1m.
	NotReadyGrace time.Duration
	// Canary is --canary: how many pods of a VPA get a decrease first,
	// unless its annotation says otherwise.
	Canary resize.Canary
	// BoostMaxRestarts is --startup-boost-max-restarts: how many restarts
	// of a container are boosted again (gate CPUStartupBoost); 0 boosts none.
	BoostMaxRestarts int32
}

// setDefaults gives the settings left at zero their defaults.
func (cfg *Config) setDefaults() {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.RestartMinReady <= 0 {
		cfg.RestartMinReady = restartMinReadyDefault
	}
	if cfg.RestartReservationTimeout <= 0 {
		cfg.RestartReservationTimeout = restartReservationTimeoutDefault
	}
	if cfg.ObservationWindow <= 0 {
		cfg.ObservationWindow = observationWindowDefault
	}
	if cfg.HarmHold <= 0 {
		cfg.HarmHold = harmHoldDefault
	}
	if cfg.NotReadyGrace <= 0 {
		cfg.NotReadyGrace = notReadyGraceDefault
	}
	if cfg.Canary == (resize.Canary{}) {
		cfg.Canary = resize.DefaultCanary
	}
}
