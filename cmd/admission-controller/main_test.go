package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mainArgsEnv, when set, makes the test binary run main with these
// arguments instead of the tests.
const mainArgsEnv = "VPA_INPLACE_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Args = append([]string{os.Args[0]}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// With --logging-format=json every log line is one JSON object, as log
// pipelines expect. The binary fails early here (no cluster), after logging.
func TestJSONLogging(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"=--logging-format=json --kubeconfig=/nonexistent/kubeconfig --tls-cert-file=/nonexistent/tls.crt --tls-private-key-file=/nonexistent/tls.key")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	require.Error(t, err, "the binary cannot reach a cluster: %s", out.String())

	logged := out.String()
	var lines int
	scanner := bufio.NewScanner(strings.NewReader(logged))
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lines++
		var entry map[string]any
		require.NoError(t, json.Unmarshal(line, &entry), "not a JSON line: %s", line)
		assert.Contains(t, entry, "ts")
		assert.Contains(t, entry, "msg")
	}
	require.NoError(t, scanner.Err())
	require.Positive(t, lines, "no log line")
	assert.Contains(t, logged, `"msg":"Admission controller failed"`)
}
