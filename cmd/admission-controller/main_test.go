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
		" --tls-cert-file=/nonexistent/tls.crt --tls-private-key-file=/nonexistent/tls.key"+
		" --feature-gates=InPlace=true,CPUStartupBoost=true", "Admission controller failed")
}

// A flag the binary does not know (here upstream VPA's name for the key
// file) is reported on stderr, with exit status 2, instead of a silent exit.
func TestUnknownFlagIsReported(t *testing.T) {
	res := testmain.Exec(t, "--tls-cert-file=/etc/tls/tls.crt --tls-private-key=/etc/tls/tls.key")
	assert.Equal(t, 2, res.ExitCode)
	assert.Contains(t, res.Stderr, "unknown flag: --tls-private-key")
}

// --log-json-split-stream, which --help advertises behind the
// LoggingAlphaOptions gate, works once that gate is on: errors go to
// stderr, as JSON, and nothing is refused.
func TestJSONSplitStream(t *testing.T) {
	res := testmain.Exec(t, "--logging-format=json --log-json-split-stream --kubeconfig=/nonexistent/kubeconfig"+
		" --tls-cert-file=/nonexistent/tls.crt --tls-private-key-file=/nonexistent/tls.key"+
		" --feature-gates=InPlace=true,LoggingAlphaOptions=true")
	assert.Equal(t, 1, res.ExitCode, "fails on the missing kubeconfig, not on its flags: %s", res.Stderr)
	assert.NotContains(t, res.Stderr, "LoggingAlphaOptions is disabled")
	assert.Contains(t, res.Stderr, `"msg":"Admission controller failed"`)
	assert.NotContains(t, res.Stdout, "Admission controller failed", "errors go to stderr only")
}
