package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
)

// shardedOptions are the sharded mode's options as hack/bench.sh gives
// them for 1,000 pods.
func shardedOptions(t *testing.T, args ...string) (*Options, []error) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("resize-bench", pflag.ContinueOnError)
	o.AddFlags(fs)
	base := []string{"--kubeconfig=admin", "--ours-binary=updater", "--ours-kubeconfig=sa", "--upstream-binary=vpa", "--upstream-kubeconfig=admin",
		"--pods=1000", "--namespaces=10", "--sharded-replicas=3"}
	require.NoError(t, fs.Parse(append(base, args...)))
	return o, o.Validate()
}

func TestShardedOptions(t *testing.T) {
	o, errs := shardedOptions(t)
	require.Empty(t, errs)
	assert.Equal(t, "1000pods-sharded3", o.Profile)
	assert.Equal(t, []UpdaterSpec{o.Ours}, o.Updaters(), "ours alone")
	assert.Equal(t, []configuration{{Name: "single", Replicas: 1, Shards: 1}, {Name: "sharded", Replicas: 3, Shards: 12}}, o.configurations())

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"one namespace", []string{"--namespaces=1"}},
		{"one replica", []string{"--sharded-replicas=1"}},
		{"more replicas than shards", []string{"--shards=2"}},
		{"one shard", []string{"--shards=1", "--sharded-replicas=2"}},
		{"past the shards' bound", []string{"--shards=257"}},
		{"with upstream alone", []string{"--only=upstream"}},
		{"a renew deadline past the lease duration", []string{"--renew-deadline=20s"}},
		{"no retry period", []string{"--retry-period=0s"}},
		{"no lease namespace", []string{"--lease-namespace="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := shardedOptions(t, tc.args...)
			assert.NotEmpty(t, errs)
		})
	}
}

// Every replica of the sharded mode runs under leader election with the
// mode's timings; the sharded ones share the shards' Leases; each has its
// own identity; the last of a flag wins, so ours' flags cannot undo them.
func TestReplicaRuns(t *testing.T) {
	o, errs := shardedOptions(t, "--lease-duration=20s", "--ours-args=--feature-gates=InPlace=true --leader-elect=false")
	require.Empty(t, errs)
	runs := o.replicaRuns()
	var names []string
	for _, r := range runs {
		names = append(names, r.name)
		assert.Equal(t, []string{"POD_NAME=" + r.name}, r.env)
		args := updaterArgs(o, o.Ours, "k", "127.0.0.1:1", r.extra)
		assert.Equal(t, "--leader-elect=true", last(args, "--leader-elect="), r.name)
		assert.Contains(t, args, "--leader-elect-lease-duration=20s")
		assert.Contains(t, args, "--leader-elect-resource-namespace=vpa-inplace-system")
		assert.Equal(t, "--kube-api-qps=50", last(args, "--kube-api-qps="), "the same QPS for every replica")
		if strings.HasPrefix(r.name, "sharded") {
			assert.Contains(t, args, "--shards=12")
			assert.Contains(t, args, "--shard-lease-prefix=vpa-inplace-updater")
		} else {
			assert.Contains(t, args, "--shards=1")
		}
	}
	assert.Equal(t, []string{"single-0", "single-1", "sharded-0", "sharded-1", "sharded-2"}, names, "the single replica's standby included")

	plain := validOptions()
	require.Empty(t, plain.Validate())
	assert.Equal(t, []replicaRun{{name: "ours"}}, plain.replicaRuns(), "outside the sharded mode, ours as it runs, with no identity")
}

// last returns the last argument beginning with prefix.
func last(args []string, prefix string) string {
	out := ""
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			out = a
		}
	}
	return out
}

// The check runs the binary with each replica's flags and passes only
// when every run stops at loading its client configuration.
func TestCheckUpdaterArgs(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "runs")
	standIn := func(body string) string {
		path := filepath.Join(dir, "stand-in")
		require.NoError(t, os.WriteFile(path, []byte("#!/usr/bin/env bash\necho \"${POD_NAME:-none} $*\" >>"+record+"\n"+body), 0o755))
		return path
	}
	o, errs := shardedOptions(t)
	require.Empty(t, errs)
	o.Ours.Binary = standIn(`echo "error: loading client configuration: stat $2: no such file" >&2; exit 1`)
	var logged []string
	require.NoError(t, CheckUpdaterArgs(t.Context(), o, func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }))
	require.NotEmpty(t, logged)
	assert.Equal(t, "check: profile 1000pods-sharded3: 1000 pods in 100 Deployments over 10 namespaces; ours as single (1 replica), then sharded (3 replicas, 12 shards); lease duration 15s", logged[0])
	runs, err := os.ReadFile(record)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(runs)), "\n")
	require.Len(t, lines, 5, "every replica of both configurations and the standby")
	assert.True(t, strings.HasPrefix(lines[2], "sharded-0 --kubeconfig="), lines[2])
	assert.Contains(t, lines[2], "--shards=12")

	o.Ours.Binary = standIn(`[[ " $* " == *" --shards=12 "* ]] && { echo "unknown flag: --shards" >&2; exit 2; }; echo "loading client configuration: x" >&2; exit 1`)
	err = CheckUpdaterArgs(t.Context(), o, t.Logf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sharded-2: stopped before loading its client configuration")
	assert.NotContains(t, err.Error(), "single-0")

	o.Ours.Binary = standIn("exit 0")
	assert.ErrorContains(t, CheckUpdaterArgs(t.Context(), o, t.Logf), "exited 0")
}

func TestMergeLatencies(t *testing.T) {
	resize := proxy.Key{Verb: "patch", Resource: "pods", Subresource: "resize"}
	a := map[proxy.Key]proxy.Latency{resize: {Count: 2, Total: 40 * time.Millisecond, Max: 30 * time.Millisecond, Failed: map[int]int{409: 1}}}
	b := map[proxy.Key]proxy.Latency{resize: {Count: 1, Total: 50 * time.Millisecond, Max: 50 * time.Millisecond, Failed: map[int]int{409: 2, 500: 1}}}
	got := mergeLatencies(a, b)[resize]
	assert.Equal(t, 3, got.Count)
	assert.Equal(t, 90*time.Millisecond, got.Total)
	assert.Equal(t, 50*time.Millisecond, got.Max)
	assert.Equal(t, map[int]int{409: 3, 500: 1}, got.Failed)
	assert.Equal(t, map[int]int{409: 1}, a[resize].Failed, "the inputs are left alone")
}
