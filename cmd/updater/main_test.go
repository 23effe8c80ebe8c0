package main

import (
	"testing"

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
