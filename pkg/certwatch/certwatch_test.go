package certwatch

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testcert"
)

// serve serves TLS with w on 127.0.0.1 until the test ends and returns a
// function telling the common name of the certificate a client is given.
func serve(t *testing.T, w *Watcher) func() string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.GetCertificate},
		ReadHeaderTimeout: time.Second,
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return func() string {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test reads the served certificate
		if err != nil {
			return "dial error: " + err.Error()
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
}

// run runs w until the test ends, and returns once w follows the files: a
// change made before would be missed by the notifications, and seen only
// when polled.
func run(t *testing.T, w *Watcher) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, w.Run(ctx)) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-w.following:
	case <-time.After(waitFor):
		t.Fatal("the watcher does not follow the files")
	}
}

// waitFor bounds each wait for a condition that the code meets within
// milliseconds on an idle machine: generous, so that a busy one does not
// fail a test that would pass.
const waitFor = time.Minute

func TestNewLoadsThePair(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.New(t, "first").Write(t, dir)
	w, err := New(certFile, keyFile, time.Hour)
	require.NoError(t, err)
	require.NoError(t, w.Ready())
	assert.Equal(t, "first", serve(t, w)())
}

func TestNewFails(t *testing.T) {
	dir := t.TempDir()
	a, b := testcert.New(t, "a"), testcert.New(t, "b")
	certFile, _ := a.Write(t, dir)
	mismatched := filepath.Join(dir, "other.key")
	require.NoError(t, os.WriteFile(mismatched, b.KeyPEM, 0o600))

	for name, files := range map[string][2]string{
		"missing certificate file":     {filepath.Join(dir, "nope.crt"), mismatched},
		"missing key file":             {certFile, filepath.Join(dir, "nope.key")},
		"key of another certificate":   {certFile, mismatched},
		"no file names":                {"", ""},
		"certificate file is not PEM":  {mismatched, mismatched},
		"key file holds a certificate": {certFile, certFile},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(files[0], files[1], time.Hour)
			assert.Error(t, err)
		})
	}
}

// A rotation by atomic replacement of the two files (cert-manager,
// hand-made rotations) is picked up through file system notifications: the
// poll interval is far longer than the test.
func TestReloadsOnFileReplacement(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.New(t, "first").Write(t, dir)
	w, err := New(certFile, keyFile, time.Hour)
	require.NoError(t, err)
	served := serve(t, w)
	run(t, w)
	require.Equal(t, "first", served())

	testcert.New(t, "second").Write(t, dir)
	require.Eventually(t, func() bool { return served() == "second" }, waitFor, 20*time.Millisecond)
}

// A mounted Secret is updated by the kubelet by pointing the ..data symlink
// at a new directory; tls.crt and tls.key are symlinks through ..data.
func TestReloadsOnSecretVolumeSwap(t *testing.T) {
	dir := t.TempDir()
	writeVersion := func(version string, pair testcert.Pair) {
		vdir := filepath.Join(dir, version)
		require.NoError(t, os.Mkdir(vdir, 0o700))
		pair.Write(t, vdir)
		require.NoError(t, os.Symlink(version, filepath.Join(dir, "..data_tmp")))
		require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	}
	writeVersion("..v1", testcert.New(t, "first"))
	for _, f := range []string{testcert.CertFile, testcert.KeyFile} {
		require.NoError(t, os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)))
	}
	w, err := New(filepath.Join(dir, testcert.CertFile), filepath.Join(dir, testcert.KeyFile), time.Hour)
	require.NoError(t, err)
	served := serve(t, w)
	run(t, w)
	require.Equal(t, "first", served())

	writeVersion("..v2", testcert.New(t, "second"))
	require.Eventually(t, func() bool { return served() == "second" }, waitFor, 20*time.Millisecond)
}

// Without notifications the files are polled.
func TestReloadsByPolling(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.New(t, "first").Write(t, dir)
	w, err := New(certFile, keyFile, 20*time.Millisecond)
	require.NoError(t, err)
	w.notify = false
	served := serve(t, w)
	run(t, w)

	testcert.New(t, "second").Write(t, dir)
	require.Eventually(t, func() bool { return served() == "second" }, waitFor, 20*time.Millisecond)
}

// Half-written rotations keep the current pair until the pair is whole.
func TestKeepsTheCurrentPairUntilTheNewOneIsComplete(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testcert.New(t, "first").Write(t, dir)
	w, err := New(certFile, keyFile, time.Hour)
	require.NoError(t, err)
	served := serve(t, w)

	second := testcert.New(t, "second")
	require.NoError(t, os.WriteFile(certFile, second.CertPEM, 0o600))
	changed, err := w.Reload()
	require.Error(t, err, "the new certificate does not match the old key")
	assert.False(t, changed)
	assert.Equal(t, "first", served())

	require.NoError(t, os.WriteFile(keyFile, second.KeyPEM, 0o600))
	changed, err = w.Reload()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "second", served())

	changed, err = w.Reload()
	require.NoError(t, err)
	assert.False(t, changed, "unchanged files are not reloaded")
}
