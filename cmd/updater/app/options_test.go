package app

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions(features.NewFeatureGate())
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse(args))
	return o
}

func TestDefaultsAreValid(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	o := parse(t)
	assert.Empty(t, o.Validate())
	assert.Equal(t, time.Minute, o.UpdaterInterval)
	assert.InDelta(t, 0.1, o.PodUpdateThreshold, 1e-9)
	assert.InDelta(t, 0.5, o.EvictionTolerance, 1e-9)
	assert.False(t, o.FeatureGate.Enabled(features.InPlace), "the InPlace gate is off by default")
	assert.False(t, o.DryRun)
	assert.Equal(t, 10*time.Minute, o.DeferredWarningAfter)
	assert.Equal(t, "vpa-inplace-system/vpa-inplace-updater-config", o.ConfigMap)
	assert.InDelta(t, 0.2, o.MemoryLimitDecreaseMargin, 1e-9)
	assert.Equal(t, "vpa-inplace-records-", o.RecordsPrefix, "the records keep the name they had before the flag")
}

// --records-prefix names the records ConfigMaps of one install apart from
// another's in the same namespace; every name it gives must be valid.
func TestRecordsPrefix(t *testing.T) {
	assert.Equal(t, "platform-vpa-inplace-records-", parse(t, "--records-prefix=platform-vpa-inplace-records-").RecordsPrefix)
	assert.Empty(t, parse(t, "--records-prefix=platform-vpa-inplace-records-").Validate())
	for _, bad := range []string{"", "Upper-", "-dash-first-", "under_score-", strings.Repeat("a", 250)} {
		errs := parse(t, "--records-prefix="+bad).Validate()
		require.Len(t, errs, 1, bad)
		assert.Contains(t, errs[0].Error(), "--records-prefix", bad)
	}
}

func TestMemoryLimitDecreaseMargin(t *testing.T) {
	for _, arg := range []string{"0", "0.5", "2"} {
		o := parse(t, "--memory-limit-decrease-margin="+arg)
		assert.Empty(t, o.Validate(), arg)
	}
	assert.InDelta(t, 0.5, parse(t, "--memory-limit-decrease-margin=0.5").MemoryLimitDecreaseMargin, 1e-9)
	for _, arg := range []string{"-0.1", "NaN", "+Inf"} {
		errs := parse(t, "--memory-limit-decrease-margin="+arg).Validate()
		require.Len(t, errs, 1, arg)
		assert.Contains(t, errs[0].Error(), "--memory-limit-decrease-margin must be a fraction of at least 0 (0.2 means 20% above the memory in use), got ")
	}
}

func TestSignalFlags(t *testing.T) {
	tests := []struct {
		args                 []string
		dryRun               bool
		deferredWarningAfter time.Duration
		configMap            string
	}{
		{[]string{"--dry-run"}, true, 10 * time.Minute, "vpa-inplace-system/vpa-inplace-updater-config"},
		{[]string{"--deferred-warning-after=30s"}, false, 30 * time.Second, "vpa-inplace-system/vpa-inplace-updater-config"},
		{[]string{"--deferred-warning-after=0"}, false, 0, "vpa-inplace-system/vpa-inplace-updater-config"},
		{[]string{"--config-map=ops/switch"}, false, 10 * time.Minute, "ops/switch"},
		{[]string{"--config-map="}, false, 10 * time.Minute, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := parse(t, tc.args...)
			assert.Empty(t, o.Validate())
			assert.Equal(t, tc.dryRun, o.DryRun)
			assert.Equal(t, tc.deferredWarningAfter, o.DeferredWarningAfter)
			assert.Equal(t, tc.configMap, o.ConfigMap)
		})
	}
}

func TestFlags(t *testing.T) {
	o := parse(t, "--feature-gates=InPlace=true,CPUStartupBoost=true", "--updater-interval=30s", "--pod-update-threshold=0.2",
		"--eviction-tolerance=0.25", "--ignored-vpa-object-namespaces=kube-system,other", "--kube-api-qps=5", "--kube-api-burst=10")
	assert.True(t, o.FeatureGate.Enabled(features.InPlace))
	assert.True(t, o.FeatureGate.Enabled(features.CPUStartupBoost))
	assert.Equal(t, 30*time.Second, o.UpdaterInterval)
	assert.Equal(t, []string{"kube-system", "other"}, o.IgnoredVPANamespaces)
	assert.Equal(t, 3, o.StartupBoostMaxRestarts, "the default")
	assert.Empty(t, o.Validate())
	assert.Empty(t, parse(t, "--startup-boost-max-restarts=0").Validate(), "0 turns boosts after a restart off")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps"},
		{[]string{"--kube-api-burst=0"}, "--kube-api-burst"},
		{[]string{"--updater-interval=10ms"}, "--updater-interval"},
		{[]string{"--pod-update-threshold=-1"}, "--pod-update-threshold"},
		{[]string{"--eviction-tolerance=1.5"}, "--eviction-tolerance"},
		{[]string{"--vpa-object-namespace=a", "--ignored-vpa-object-namespaces=b"}, "cannot be used together"},
		{[]string{"--workers=-1"}, "--workers"},
		{[]string{"--deferred-warning-after=-1s"}, "--deferred-warning-after"},
		{[]string{"--restart-reservation-timeout=0"}, "--restart-reservation-timeout"},
		{[]string{"--decrease-min-history=-1s"}, "--decrease-min-history"},
		{[]string{"--recommender-interval=0"}, "--recommender-interval"},
		{[]string{"--max-freeze=0"}, "--max-freeze"},
		{[]string{"--config-map=no-namespace"}, "--config-map must be namespace/name"},
		{[]string{"--config-map=/name"}, "--config-map must be namespace/name"},
		{[]string{"--config-map=a/b/c"}, "--config-map must be namespace/name"},
		{[]string{"--records-owner=Not_A_Name"}, "--records-owner"},
		{[]string{"--startup-boost-max-restarts=-1"}, "--startup-boost-max-restarts"},
		{[]string{"--startup-boost-max-restarts=101"}, "--startup-boost-max-restarts"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			errs := parse(t, tc.args...).Validate()
			require.Len(t, errs, 1)
			assert.Contains(t, errs[0].Error(), tc.want)
		})
	}
}

func TestUnknownFeatureGateIsRejected(t *testing.T) {
	o := NewOptions(features.NewFeatureGate())
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	assert.Error(t, fs.Parse([]string{"--feature-gates=Nope=true"}))
}

func TestEffectiveWorkers(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{nil, 50},
		{[]string{"--kube-api-qps=5"}, 16},
		{[]string{"--kube-api-qps=200.5"}, 201},
		{[]string{"--workers=4", "--kube-api-qps=200"}, 4},
		{[]string{"--workers=0", "--kube-api-qps=100"}, 100},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := parse(t, tc.args...)
			require.Empty(t, o.Validate())
			assert.Equal(t, tc.want, o.EffectiveWorkers())
		})
	}
}

// The records live in the updater's own namespace, as the downward API
// tells it (issue #32, item 5: POD_NAMESPACE was set and never read, and a
// chart installed elsewhere wrote into a namespace that did not exist).
func TestRecordsNamespaceDefaultsToThePodsNamespace(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	assert.Equal(t, "autoscaling", DefaultNamespace(env(map[string]string{"POD_NAMESPACE": "autoscaling"})))
	assert.Equal(t, FallbackNamespace, DefaultNamespace(env(nil)), "outside a pod")
	assert.Equal(t, FallbackNamespace, DefaultNamespace(env(map[string]string{"POD_NAMESPACE": ""})))

	t.Setenv("POD_NAMESPACE", "autoscaling")
	assert.Equal(t, "autoscaling", parse(t).RecordsNamespace)
	assert.Equal(t, "elsewhere", parse(t, "--records-namespace=elsewhere").RecordsNamespace, "the flag wins")
}

// The Lease and the kill switch are in the updater's own namespace too, as
// the downward API tells it: an updater installed elsewhere that is not
// given these flags does not look for them in vpa-inplace-system.
func TestLeaseAndKillSwitchDefaultToThePodsNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "autoscaling")
	o := parse(t)
	assert.Equal(t, "autoscaling", o.LeaderElection.ResourceNamespace)
	assert.Equal(t, "autoscaling/vpa-inplace-updater-config", o.ConfigMap)
	o = parse(t, "--leader-elect-resource-namespace=elsewhere", "--config-map=other/switch")
	assert.Equal(t, "elsewhere", o.LeaderElection.ResourceNamespace, "the flag wins")
	assert.Equal(t, "other/switch", o.ConfigMap, "the flag wins")

	t.Setenv("POD_NAMESPACE", "")
	o = parse(t)
	assert.Equal(t, FallbackNamespace, o.LeaderElection.ResourceNamespace, "outside a pod")
	assert.Equal(t, FallbackNamespace+"/vpa-inplace-updater-config", o.ConfigMap, "outside a pod")
}

func TestShards(t *testing.T) {
	o := parse(t)
	assert.Equal(t, 1, o.Shards, "one replica works every namespace, as before --shards")
	assert.Equal(t, []string{"vpa-inplace-updater"}, o.leaseNames(), "the leader election's Lease only")

	assert.Empty(t, parse(t, "--node-room-buckets=0").Validate(), "without shards the buckets are not used")

	o = parse(t, "--shards=3", "--shard-lease-prefix=platform")
	assert.Empty(t, o.Validate())
	assert.Equal(t, 16, o.NodeRoomBuckets)
	assert.Equal(t, []string{"vpa-inplace-updater", "platform-shard-0", "platform-member-0", "platform-shard-1", "platform-member-1",
		"platform-shard-2", "platform-member-2"}, o.leaseNames())

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards=0"}, "--shards"},
		{[]string{"--shards=257"}, "--shards"},
		{[]string{"--shards=4", "--leader-elect=false"}, "--leader-elect must be true"},
		{[]string{"--shards=4", "--vpa-object-namespace=team"}, "--vpa-object-namespace"},
		{[]string{"--shards=4", "--shard-lease-prefix=Not_A_Name"}, "--shard-lease-prefix"},
		{[]string{"--shards=4", "--node-room-buckets=0"}, "--node-room-buckets must be from 1 to 64"},
		{[]string{"--shards=4", "--node-room-buckets=65"}, "--node-room-buckets must be from 1 to 64"},
		// Long enough a prefix for the shards' Leases, not for the
		// buckets' ConfigMaps.
		{[]string{"--shards=4", "--shard-lease-prefix=" + strings.Repeat("a", 242)}, "makes no ConfigMap name for the node room buckets"},
		{[]string{"--shards=4", "--leader-elect-lease-duration=900ms", "--leader-elect-renew-deadline=500ms", "--leader-elect-retry-period=100ms"}, "at least 1s"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			errs := parse(t, tc.args...).Validate()
			require.NotEmpty(t, errs)
			var all []string
			for _, err := range errs {
				all = append(all, err.Error())
			}
			assert.Contains(t, strings.Join(all, "\n"), tc.want)
		})
	}
}
