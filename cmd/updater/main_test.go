package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testmain"
)

func TestMain(m *testing.M) { testmain.Run(m, main) }

// With --logging-format=json every log line is one JSON object, as log
// pipelines expect. The binary fails early here (no cluster), after logging;
// its flags, both feature gates among them, parse.
func TestJSONLogging(t *testing.T) {
	testmain.RequireJSONLines(t, "--logging-format=json --kubeconfig=/nonexistent/kubeconfig"+
		" --feature-gates=InPlace=true,CPUStartupBoost=true", "Updater failed")
}

// --log-json-split-stream, which --help advertises behind the
// LoggingAlphaOptions gate, works once that gate is on: errors go to
// stderr, as JSON, and nothing is refused.
func TestJSONSplitStream(t *testing.T) {
	res := testmain.Exec(t, "--logging-format=json --log-json-split-stream --kubeconfig=/nonexistent/kubeconfig"+
		" --feature-gates=InPlace=true,LoggingAlphaOptions=true")
	assert.Equal(t, 1, res.ExitCode, "fails on the missing kubeconfig, not on its flags: %s", res.Stderr)
	assert.NotContains(t, res.Stderr, "LoggingAlphaOptions is disabled")
	assert.Contains(t, res.Stderr, `"msg":"Updater failed"`)
	assert.NotContains(t, res.Stdout, "Updater failed", "errors go to stderr only")
}
