// Package testmain runs a binary's main from its own test binary, for tests
// of what the binary prints.
package testmain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// argsEnv, when set, makes the test binary run main with these arguments
// instead of the tests.
const argsEnv = "VPA_INPLACE_TEST_MAIN_ARGS"

// Run is the body of a main package's TestMain: it runs main when the test
// binary was started by Exec, and the tests otherwise.
func Run(m *testing.M, main func()) {
	if args, ok := os.LookupEnv(argsEnv); ok {
		os.Args = append([]string{os.Args[0]}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// RequireJSONLines runs main with args, expects it to fail (it reaches no
// cluster), and checks that every line it printed is a JSON log entry and
// that one has the message want.
func RequireJSONLines(t *testing.T, args, want string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), argsEnv+"="+args)
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
	assert.Contains(t, logged, `"msg":"`+want+`"`)
}

// Result is what one run of main printed, and how it exited.
type Result struct {
	Stdout, Stderr string
	// ExitCode is the process's exit status (0 when main returned).
	ExitCode int
}

// Exec runs main with args (split on spaces) and returns what it printed
// on each stream and its exit status.
func Exec(t *testing.T, args string) Result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), argsEnv+"="+args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitCode()
	} else {
		require.NoError(t, err, "running main")
	}
	return res
}
