// Package app wires the updater: flags -> options -> run.
package app

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/featuregate"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard/owner"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom/buckets"
	"github.com/vpa-inplace/vpa-inplace/pkg/window"
)

// Options are the updater's settings, one per flag.
type Options struct {
	Kubeconfig           string
	KubeAPIQPS           float32
	KubeAPIBurst         int
	UpdaterInterval      time.Duration
	PodUpdateThreshold   float64
	EvictionTolerance    float64
	RestartMinReady      time.Duration
	ReversalHold         time.Duration
	VPAObjectNamespace   string
	IgnoredVPANamespaces []string
	Workers              int
	Address              string
	Profiling            bool
	DryRun               bool
	DeferredWarningAfter time.Duration
	ConfigMap            string
	RecordsNamespace     string
	// RecordsOwner names the Lease of RecordsNamespace that owns every
	// records ConfigMap; empty: none.
	RecordsOwner string
	// RecordsPrefix begins the names of the records ConfigMaps.
	RecordsPrefix string
	// MemoryLimitDecreaseMargin: a memory limit is lowered only above the
	// memory in use x (1 + margin), when the metrics API tells the usage.
	MemoryLimitDecreaseMargin float64
	// RestartReservationTimeout bounds how long a restarting resize the
	// kubelet has not applied keeps its place in the disruption budget.
	RestartReservationTimeout time.Duration
	// ResizeObservationWindow, HarmHold, HarmNotReadyGrace and Canary are
	// the watch after a resize (docs/safety-after-resize.md).
	ResizeObservationWindow time.Duration
	HarmHold                time.Duration
	HarmNotReadyGrace       time.Duration
	Canary                  string
	// DecreaseMinHistory: how much usage history a recommendation must
	// rest on before a decrease inside its range is sent.
	DecreaseMinHistory time.Duration
	// RecommenderInterval: how often the recommender writes its
	// checkpoints; one last written more than two of them ago proves
	// nothing for a decrease.
	RecommenderInterval time.Duration
	// MaxFreeze bounds how far ahead a freeze-until annotation may end.
	MaxFreeze      time.Duration
	FeatureGate    featuregate.MutableFeatureGate
	LeaderElection componentbaseconfig.LeaderElectionConfiguration

	// StartupBoostMaxRestarts: how many restarts of a container are
	// boosted again (gate CPUStartupBoost).
	StartupBoostMaxRestarts int

	// Shards is how many shards the namespaces are cut into, shared by the
	// replicas through Leases; 1: one replica works every namespace, under
	// leader election.
	Shards int
	// ShardLeasePrefix begins the names of the shards' Leases:
	// <prefix>-shard-<i> and <prefix>-member-<i>, in the leader election
	// Lease's namespace.
	ShardLeasePrefix string
	// NodeRoomBuckets is how many ConfigMaps the nodes are spread over
	// to reserve node room through the API with --shards above 1:
	// <ShardLeasePrefix>-noderoom-<b>, in RecordsNamespace.
	NodeRoomBuckets int
}

// FallbackNamespace is the updater's namespace when it does not know its
// own (run outside a pod): the namespace of deploy/.
const FallbackNamespace = "vpa-inplace-system"

// MaxStartupBoostRestarts bounds --startup-boost-max-restarts: a container
// that restarted that often is failing, whatever the setting.
const MaxStartupBoostRestarts = 100

// DefaultKillSwitchName is the name of the kill switch ConfigMap in the
// default of --config-map.
const DefaultKillSwitchName = "vpa-inplace-updater-config"

// DefaultNamespace is the updater's own namespace, from the POD_NAMESPACE
// environment variable (lookup) that the Deployment sets through the
// downward API, or FallbackNamespace when it is unset: the default
// namespace of its records (--records-namespace), its Lease
// (--leader-elect-resource-namespace) and its kill switch (--config-map).
func DefaultNamespace(lookup func(string) (string, bool)) string {
	if ns, ok := lookup("POD_NAMESPACE"); ok && ns != "" {
		return ns
	}
	return FallbackNamespace
}

// NewOptions returns the defaults.
func NewOptions(gate featuregate.MutableFeatureGate) *Options {
	namespace := DefaultNamespace(os.LookupEnv)
	return &Options{
		KubeAPIQPS:                50,
		KubeAPIBurst:              100,
		UpdaterInterval:           time.Minute,
		PodUpdateThreshold:        0.1,
		EvictionTolerance:         0.5,
		RestartMinReady:           30 * time.Second,
		RestartReservationTimeout: 10 * time.Minute,
		ReversalHold:              15 * time.Minute,
		DecreaseMinHistory:        time.Hour,
		RecommenderInterval:       time.Minute, // upstream recommender's default
		MaxFreeze:                 window.DefaultMaxFreeze,
		Address:                   ":8943",
		DeferredWarningAfter:      10 * time.Minute,
		ConfigMap:                 namespace + "/" + DefaultKillSwitchName,
		RecordsNamespace:          namespace,
		RecordsPrefix:             records.DefaultConfigMapPrefix,
		FeatureGate:               gate,
		MemoryLimitDecreaseMargin: 0.2,
		ResizeObservationWindow:   10 * time.Minute,
		HarmHold:                  24 * time.Hour,
		HarmNotReadyGrace:         time.Minute,
		Canary:                    "1",
		StartupBoostMaxRestarts:   3,
		Shards:                    1,
		ShardLeasePrefix:          "vpa-inplace-updater",
		NodeRoomBuckets:           buckets.DefaultBuckets,
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      "leases",
			ResourceName:      "vpa-inplace-updater",
			ResourceNamespace: namespace,
		},
	}
}

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig. Empty: the in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Queries per second to the Kubernetes API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Burst of queries to the Kubernetes API server.")
	fs.DurationVar(&o.UpdaterInterval, "updater-interval", o.UpdaterInterval,
		"How often every pod of every InPlace VPA is looked at again, to catch what events missed. Changes are acted on as events arrive, not on this interval.")
	fs.Float64Var(&o.PodUpdateThreshold, "pod-update-threshold", o.PodUpdateThreshold,
		"Minimum relative change of requests (summed over resources) worth a resize when requests are inside the recommended range.")
	fs.Float64Var(&o.EvictionTolerance, "eviction-tolerance", o.EvictionTolerance,
		"Fraction of a workload's pods whose containers may be restarted at once by resizes (containers whose resizePolicy is RestartContainer for a changed resource). At least one pod at a time. Resizes that restart nothing are not limited.")
	fs.DurationVar(&o.RestartMinReady, "restart-min-ready", o.RestartMinReady,
		"How long a pod whose containers a resize restarted must stay Ready before the next pod of its workload may be restarted, when the workload sets no spec.minReadySeconds (custom resources never do). Until then it counts against --eviction-tolerance and its PodDisruptionBudgets.")
	fs.DurationVar(&o.RestartReservationTimeout, "restart-reservation-timeout", o.RestartReservationTimeout,
		"How long a resize that restarts containers keeps its place under --eviction-tolerance and PodDisruptionBudgets while its pod stays Ready and the kubelet has not applied it: then, unless the pod still shows the resize pending (Deferred, failing on the node: the kubelet may apply it, and restart the pod, at any time; its place is kept while it does), the place is given back, with a warning event, and the other pods of the workload may be resized. A pod that is not Ready keeps its place until it is back; a resize the kubelet marks Infeasible, or the API server refuses, gives it back at once.")
	fs.DurationVar(&o.ReversalHold, "resize-reversal-hold", o.ReversalHold,
		"How long after a pod's resize a change that would only move its requests back the way that resize came is held, while every request stays inside the recommended range: a recommendation flapping between two values resizes the pod once, not at every flap. A request outside the recommended range is never held. 0 holds nothing.")
	fs.DurationVar(&o.DecreaseMinHistory, "decrease-min-history", o.DecreaseMinHistory,
		"How much usage history a recommendation must rest on before a decrease inside its recommended range is sent (docs/resize-timing.md): read from the recommender's checkpoint of the container (first and last sample, number of samples), else from the width of its bounds (upstream's recommender widens them while its history is short), else, when they prove nothing (equal to the target, capped), from the VPA's age. A request above the upper bound is lowered at once, and increases never wait for evidence. No decrease is sent while the checkpoint holds no sample, or was last written more than two --recommender-interval ago. 0 asks for no more than that.")
	fs.DurationVar(&o.RecommenderInterval, "recommender-interval", o.RecommenderInterval,
		"How often the VPA recommender runs its loop and writes its checkpoints (the recommender's own --recommender-interval; upstream's default is 1m). A checkpoint last written more than two of these before a decision proves nothing for a decrease inside the recommended range: the decrease waits until the recommender writes the checkpoint again (docs/resize-timing.md). A value longer than the recommender's is more lenient.")
	fs.DurationVar(&o.MaxFreeze, "max-freeze", o.MaxFreeze,
		"How far ahead a vpa-inplace.dev/freeze-until annotation may end (docs/resize-timing.md). A freeze ending later is invalid: the VPA is then frozen until the annotation is corrected, with a warning event, never left unrestricted.")
	fs.StringVar(&o.VPAObjectNamespace, "vpa-object-namespace", o.VPAObjectNamespace,
		"Only handle VPA objects (and their pods) in this namespace. Empty: all namespaces.")
	fs.StringSliceVar(&o.IgnoredVPANamespaces, "ignored-vpa-object-namespaces", o.IgnoredVPANamespaces,
		"Comma-separated namespaces whose VPA objects and pods are ignored. Cannot be combined with --vpa-object-namespace.")
	fs.IntVar(&o.Workers, "workers", o.Workers,
		"Number of pods handled concurrently; 0: --kube-api-qps rounded up, at least 16. A worker mostly waits for a resize round trip, so it takes about --kube-api-qps x the API latency of workers to send resizes as fast as the client limits allow; with as many workers as the QPS, the client's rate limiter stays the bound up to a second of latency.")
	fs.StringVar(&o.Address, "address", o.Address,
		"Address serving /healthz, /readyz and /metrics.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling,
		"Also serve Go runtime profiles (heap, goroutines, CPU) under /debug/pprof/ on --address. Off by default: that address has no authentication.")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun,
		"Decide and report (events, metrics, the VPA condition, logs) but never send a resize. Infeasible records are then kept in memory only.")
	fs.DurationVar(&o.DeferredWarningAfter, "deferred-warning-after", o.DeferredWarningAfter,
		"How long the kubelet may hold a resize Deferred before a warning event on the pod and its VPA. The pod keeps waiting and is never evicted. 0 disables the warning.")
	fs.StringVar(&o.ConfigMap, "config-map", o.ConfigMap,
		`Namespace/name of the ConfigMap whose key paused: "true" pauses every resize cluster-wide, without a redeploy. Default: `+DefaultKillSwitchName+` in the updater's own namespace (POD_NAMESPACE, as for --records-namespace). Empty: no cluster-wide switch.`)
	fs.StringVar(&o.RecordsNamespace, "records-namespace", o.RecordsNamespace,
		"Namespace of the ConfigMaps holding the records of resizes that cannot succeed (one ConfigMap per VPA and kind of record), so that a restart or a new leader does not send them again. Default: the updater's own namespace, from the POD_NAMESPACE environment variable (the Deployment sets it from the downward API), or "+FallbackNamespace+" when it is unset (run outside the cluster with --kubeconfig). It must exist and the updater must be allowed to create ConfigMaps there, or the updater does not start. Tenants must not be able to write there.")
	fs.StringVar(&o.RecordsOwner, "records-owner", o.RecordsOwner,
		"Name of a Lease in --records-namespace that owns every records ConfigMap (an ownerReference, set at each write), so that deleting it has the garbage collector delete the records: the manifests ship the updater's leader election Lease and name it here, so that helm uninstall and kubectl delete -k leave no record behind. It must exist when the updater starts, or the updater does not start. Empty: the records have no owner and stay until deleted by hand.")
	fs.StringVar(&o.RecordsPrefix, "records-prefix", o.RecordsPrefix,
		"Beginning of the names of the records ConfigMaps (<prefix><store>-<VPA UID>), so that two installs in one --records-namespace keep their records apart: the chart sets <release fullname>-records-. ConfigMaps of the default name, written before the prefix was changed, are moved to the new name when the updater loads them: those owned by the --records-owner Lease, or by nothing, of a VPA it serves.")
	fs.Float64Var(&o.MemoryLimitDecreaseMargin, "memory-limit-decrease-margin", o.MemoryLimitDecreaseMargin,
		"A container's memory limit is lowered in place only to a value above its memory in use times (1 + this margin), with the usage read from the metrics API (metrics.k8s.io) when it is served; otherwise the limit is kept and the rest of the resize is applied. 0.2 means 20%. Without the metrics API, the kubelet's own check (1.34+) decides, and its refusal is recorded and not tried again.")
	fs.DurationVar(&o.ResizeObservationWindow, "resize-observation-window", o.ResizeObservationWindow,
		"How long a pod is watched for harm once its resize has completed: a container OOM-killed or restarted, Ready lost for longer than --harm-not-ready-grace, the pod evicted by the kubelet. Harm after a resize that lowered values resizes the pod back in place and holds the values for the whole VPA (--harm-hold); a decrease goes to the other pods only after its canaries have been watched this long. A VPA's annotation vpa-inplace.dev/observation-window sets its own (30s to 24h).")
	fs.DurationVar(&o.HarmHold, "harm-hold", o.HarmHold,
		"How long values harm was seen at after a resize that lowered them are held for the whole VPA: no pod of it is lowered to them, or below, until the recommendation rises above them or this time has passed. Harm again at values of the same containers and resources within as long after a hold ended as it lasted starts the next hold in a row, twice as long, up to 7 days (or this time, when longer). The hold is a record in --records-namespace: it survives a restart and a change of leader, and the admission controller gives new pods what it holds.")
	fs.DurationVar(&o.HarmNotReadyGrace, "harm-not-ready-grace", o.HarmNotReadyGrace,
		"How long a pod watched after its resize may stay not Ready before it counts as harm. After a restart the resize causes (resizePolicy RestartContainer), the grace counts from when the pod is Ready again; not Ready again by the end of the window is harm.")
	fs.StringVar(&o.Canary, "canary", o.Canary,
		`How many pods of a VPA get a lower target first, before the others get it once these have been watched for --resize-observation-window without harm: "off", a number of pods, or a percentage ("25%", rounded up). At most all pods but one; a VPA with one pod is lowered at once. Increases always go to every pod at once. A VPA's annotation vpa-inplace.dev/canary sets its own.`)
	fs.IntVar(&o.StartupBoostMaxRestarts, "startup-boost-max-restarts", o.StartupBoostMaxRestarts,
		"With the CPUStartupBoost gate: a container of a VPA with a startupBoost that restarts (a crash, an OOM kill) after its startup boost ended is boosted again in place, as at startup, for its restarts up to this many in its pod's life; a container restarting more often is failing repeatedly and is not boosted again (event InPlaceStartupBoostBackedOff). 0: restarts are never boosted.")
	fs.IntVar(&o.Shards, "shards", o.Shards,
		fmt.Sprintf("How many shards the namespaces are cut into (1 to %d), by the 64-bit FNV-1a hash of their names as the API server's sharded list and watch cuts them, shared by the replicas through a Lease per shard (docs/scaling.md): each replica holds at most its share, caches and works only its shards' namespaces, and takes over a dead replica's shards once their Leases expire. 1: one replica works every namespace, the others stand by (leader election). A replica beyond this many holds nothing.", shard.MaxShards))
	fs.StringVar(&o.ShardLeasePrefix, "shard-lease-prefix", o.ShardLeasePrefix,
		"Beginning of the names of the shards' Leases, in --leader-elect-resource-namespace: <prefix>-shard-<i>, one per shard, and <prefix>-member-<i>, one per replica that may share them (as many as shards). The manifests ship them; the updater may only read and update them. Used with --shards above 1.")
	fs.IntVar(&o.NodeRoomBuckets, "node-room-buckets", o.NodeRoomBuckets,
		fmt.Sprintf("With --shards above 1: how many ConfigMaps of --records-namespace (<shard-lease-prefix>-noderoom-<b>) the nodes are spread over, by the FNV-1a hash of their names, to reserve through the API the room of the resizes sent only when they fit their node (resize-when: fits-node), so that the replicas never together send resizes a node cannot take (docs/scaling.md). 1 to %d; every replica must run with the same. The manifests ship them; the updater reads, watches and updates them by name, and creates one that is missing where RBAC allows.", buckets.MaxBuckets))
	o.FeatureGate.AddFlag(fs)
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, fs)
	if f := fs.Lookup("leader-elect-resource-namespace"); f != nil {
		f.Usage = "Namespace of the leader election Lease. Default: the updater's own namespace (POD_NAMESPACE, as for --records-namespace), or " +
			FallbackNamespace + " when it is unset."
	}
}

// Validate returns every problem with the options.
func (o *Options) Validate() []error {
	var errs []error
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be positive, got %d", o.KubeAPIBurst))
	}
	if o.UpdaterInterval < time.Second {
		errs = append(errs, fmt.Errorf("--updater-interval must be at least 1s, got %s", o.UpdaterInterval))
	}
	if o.PodUpdateThreshold < 0 {
		errs = append(errs, fmt.Errorf("--pod-update-threshold must not be negative, got %v", o.PodUpdateThreshold))
	}
	if o.EvictionTolerance < 0 || o.EvictionTolerance > 1 {
		errs = append(errs, fmt.Errorf("--eviction-tolerance must be between 0 and 1, got %v", o.EvictionTolerance))
	}
	if o.ReversalHold < 0 {
		errs = append(errs, fmt.Errorf("--resize-reversal-hold must not be negative, got %s", o.ReversalHold))
	}
	if o.DecreaseMinHistory < 0 {
		errs = append(errs, fmt.Errorf("--decrease-min-history must not be negative, got %s", o.DecreaseMinHistory))
	}
	if o.RecommenderInterval <= 0 {
		errs = append(errs, fmt.Errorf("--recommender-interval must be positive, got %s", o.RecommenderInterval))
	}
	if o.MaxFreeze <= 0 {
		errs = append(errs, fmt.Errorf("--max-freeze must be positive, got %s", o.MaxFreeze))
	}
	if o.RestartMinReady <= 0 {
		errs = append(errs, fmt.Errorf("--restart-min-ready must be positive, got %s", o.RestartMinReady))
	}
	if o.RestartReservationTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--restart-reservation-timeout must be positive, got %s", o.RestartReservationTimeout))
	}
	if o.RecordsOwner != "" {
		if errs1123 := validation.IsDNS1123Subdomain(o.RecordsOwner); len(errs1123) > 0 {
			errs = append(errs, fmt.Errorf("--records-owner %q is no Lease name: %s", o.RecordsOwner, strings.Join(errs1123, "; ")))
		}
	}
	if err := records.ValidatePrefix(o.RecordsPrefix); err != nil {
		errs = append(errs, fmt.Errorf("--records-prefix: %w", err))
	}
	if errs1123 := validation.IsDNS1123Label(o.RecordsNamespace); len(errs1123) > 0 {
		errs = append(errs, fmt.Errorf("--records-namespace %q is no namespace name: %s", o.RecordsNamespace, strings.Join(errs1123, "; ")))
	}
	if o.VPAObjectNamespace != "" && len(o.IgnoredVPANamespaces) > 0 {
		errs = append(errs, fmt.Errorf("--vpa-object-namespace and --ignored-vpa-object-namespaces cannot be used together"))
	}
	if le := o.LeaderElection; le.LeaderElect {
		if le.ResourceLock != "leases" {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be leases, got %q", le.ResourceLock))
		}
		if le.RenewDeadline.Duration >= le.LeaseDuration.Duration {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s)", le.RenewDeadline.Duration, le.LeaseDuration.Duration))
		}
		if le.ResourceName == "" || le.ResourceNamespace == "" {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-name and --leader-elect-resource-namespace must be set"))
		}
	}
	if m := o.MemoryLimitDecreaseMargin; math.IsNaN(m) || math.IsInf(m, 0) || m < 0 {
		errs = append(errs, fmt.Errorf("--memory-limit-decrease-margin must be a fraction of at least 0 (0.2 means 20%% above the memory in use), got %v", m))
	}
	if o.DeferredWarningAfter < 0 {
		errs = append(errs, fmt.Errorf("--deferred-warning-after must not be negative, got %s", o.DeferredWarningAfter))
	}
	if o.ConfigMap != "" {
		if _, _, err := o.configMapName(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.ResizeObservationWindow <= 0 {
		errs = append(errs, fmt.Errorf("--resize-observation-window must be positive, got %s", o.ResizeObservationWindow))
	}
	if o.HarmHold <= 0 {
		errs = append(errs, fmt.Errorf("--harm-hold must be positive, got %s", o.HarmHold))
	}
	if o.HarmNotReadyGrace <= 0 {
		errs = append(errs, fmt.Errorf("--harm-not-ready-grace must be positive, got %s", o.HarmNotReadyGrace))
	}
	if _, err := resize.ParseCanary(o.Canary); err != nil {
		errs = append(errs, fmt.Errorf("--canary: %w", err))
	}
	if o.Workers < 0 {
		errs = append(errs, fmt.Errorf("--workers must be 0 (automatic) or positive, got %d", o.Workers))
	}
	errs = append(errs, o.validateShards()...)
	if o.StartupBoostMaxRestarts < 0 || o.StartupBoostMaxRestarts > MaxStartupBoostRestarts {
		errs = append(errs, fmt.Errorf("--startup-boost-max-restarts must be from 0 to %d, got %d", MaxStartupBoostRestarts, o.StartupBoostMaxRestarts))
	}
	return errs
}

// minWorkers is the fewest workers --workers=0 gives.
const minWorkers = 16

// EffectiveWorkers is --workers, or for 0 as many workers as --kube-api-qps
// (rounded up), at least minWorkers: enough that the client's rate limiter,
// not the number of round trips in flight, bounds the resizes sent while
// the API server answers within a second.
func (o *Options) EffectiveWorkers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return max(minWorkers, int(math.Ceil(float64(o.KubeAPIQPS))))
}

// configMapName splits --config-map into namespace and name.
func (o *Options) configMapName() (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(o.ConfigMap, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--config-map must be namespace/name, got %q", o.ConfigMap)
	}
	return namespace, name, nil
}

// validateShards checks --shards and what sharing them needs: Leases,
// durations client-go's elector accepts, and every namespace served.
func (o *Options) validateShards() []error {
	var errs []error
	if _, err := shard.NewLayout(o.Shards); err != nil {
		errs = append(errs, fmt.Errorf("--shards: %w", err))
	}
	if o.Shards <= 1 {
		return errs
	}
	le := o.LeaderElection
	if !le.LeaderElect {
		errs = append(errs, fmt.Errorf("--shards above 1 shares the shards through Leases: --leader-elect must be true"))
	}
	if o.VPAObjectNamespace != "" {
		errs = append(errs, fmt.Errorf("--shards above 1 cannot be used with --vpa-object-namespace: one namespace is in one shard"))
	}
	if le.LeaseDuration.Duration < time.Second {
		errs = append(errs, fmt.Errorf("--shards above 1 needs --leader-elect-lease-duration of at least 1s, got %s", le.LeaseDuration.Duration))
	}
	if errs1123 := validation.IsDNS1123Subdomain(owner.ShardLeaseName(o.ShardLeasePrefix, o.Shards-1)); len(errs1123) > 0 {
		errs = append(errs, fmt.Errorf("--shard-lease-prefix %q makes no Lease name: %s", o.ShardLeasePrefix, strings.Join(errs1123, "; ")))
	}
	if o.NodeRoomBuckets < 1 || o.NodeRoomBuckets > buckets.MaxBuckets {
		errs = append(errs, fmt.Errorf("--node-room-buckets must be from 1 to %d, got %d", buckets.MaxBuckets, o.NodeRoomBuckets))
	} else if errs1123 := validation.IsDNS1123Subdomain(buckets.Name(o.ShardLeasePrefix, o.NodeRoomBuckets-1)); len(errs1123) > 0 {
		errs = append(errs, fmt.Errorf("--shard-lease-prefix %q makes no ConfigMap name for the node room buckets: %s", o.ShardLeasePrefix, strings.Join(errs1123, "; ")))
	}
	return errs
}

// leaseNames returns the Leases the updater elects on: the leader
// election's, and with --shards above 1 the shards' and the members'.
func (o *Options) leaseNames() []string {
	names := []string{o.LeaderElection.ResourceName}
	if o.Shards > 1 {
		for i := range o.Shards {
			names = append(names, owner.ShardLeaseName(o.ShardLeasePrefix, i), owner.MemberLeaseName(o.ShardLeasePrefix, i))
		}
	}
	return names
}
