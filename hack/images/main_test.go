package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fakeELF is the smallest ELF64 executable header debug/elf reads: for the
// machine given, static, or naming an interpreter as a dynamically linked
// binary does.
func fakeELF(t *testing.T, machine elf.Machine, interp bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Ehsize: 64, Phentsize: 56, Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	interpPath := []byte("/lib/ld-linux.so.2\x00")
	if interp {
		h.Phoff, h.Phnum = 64, 1
	}
	if err := binary.Write(&buf, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	if interp {
		p := elf.Prog64{Type: uint32(elf.PT_INTERP), Off: 64 + 56, Filesz: uint64(len(interpPath)), Memsz: uint64(len(interpPath))}
		if err := binary.Write(&buf, binary.LittleEndian, p); err != nil {
			t.Fatal(err)
		}
		buf.Write(interpPath)
	}
	return buf.Bytes()
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var testLabels = map[string]string{
	"org.opencontainers.image.title":       "updater",
	"org.opencontainers.image.description": "test image",
	"org.opencontainers.image.source":      "https://example.com/vpa-inplace",
	"org.opencontainers.image.version":     "0.1.0",
	"org.opencontainers.image.revision":    "0123456789abcdef0123456789abcdef01234567",
	"org.opencontainers.image.licenses":    "NOASSERTION",
	"org.opencontainers.image.created":     "2026-11-26T00:00:00Z",
}

// buildArgs are the arguments hack/images/build.sh passes, for fake binaries
// of both platforms in dir.
func buildArgs(t *testing.T, dir, out string) []string {
	t.Helper()
	amd := writeFile(t, dir, "updater-amd64", fakeELF(t, elf.EM_X86_64, false))
	arm := writeFile(t, dir, "updater-arm64", fakeELF(t, elf.EM_AARCH64, false))
	args := []string{"build", "-name", "updater", "-out", out, "-tag", "0.1.0", "-created", "2026-11-26T00:00:00Z",
		"-binary", "linux/amd64=" + amd, "-binary", "linux/arm64=" + arm}
	for k, v := range testLabels {
		args = append(args, "-label", k+"="+v)
	}
	return args
}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("images %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func runErr(t *testing.T, args ...string) error {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	if err == nil {
		t.Fatalf("images %s succeeded, want an error\n%s", strings.Join(args, " "), stdout.String())
	}
	return err
}

func wantErrContaining(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func TestBuildWritesAMultiArchImageThatVerifies(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "updater.tar")
	runOK(t, buildArgs(t, dir, out)...)

	report := runOK(t, "verify", "-name", "updater", "-label", "org.opencontainers.image.version=0.1.0", out)
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		if !strings.Contains(report, "0.1.0 "+p+": user 65532:65532, entrypoint /updater") {
			t.Errorf("verify did not report %s:\n%s", p, report)
		}
	}

	idx, ref, tmp, err := openIndex(out)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if ref != "0.1.0" {
		t.Errorf("ref.name %q, want the tag 0.1.0", ref)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("%d manifests, want 2", len(im.Manifests))
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("%s: config %s/%s", d.Platform.Architecture, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/updater" {
			t.Errorf("%s: user %q entrypoint %q", d.Platform.Architecture, cf.Config.User, cf.Config.Entrypoint)
		}
		if cf.Config.Labels["org.opencontainers.image.source"] != testLabels["org.opencontainers.image.source"] {
			t.Errorf("%s: labels %v", d.Platform.Architecture, cf.Config.Labels)
		}
		if !cf.Created.Time.Equal(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: created %v", d.Platform.Architecture, cf.Created)
		}
	}
}

func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	outA := runOK(t, buildArgs(t, dir, a)...)
	outB := runOK(t, buildArgs(t, dir, b)...)
	digestA, digestB := strings.Fields(outA)[1], strings.Fields(outB)[1]
	if digestA != digestB {
		t.Errorf("two builds of the same inputs: %s and %s", digestA, digestB)
	}
	ta, _ := os.ReadFile(a)
	tb, _ := os.ReadFile(b)
	if !bytes.Equal(ta, tb) {
		t.Error("two builds of the same inputs wrote different tar files")
	}
}

func TestBuildRefusesBinariesThatWouldNotRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arm64   func(t *testing.T) []byte
		wantErr string
	}{
		{"an amd64 binary for arm64", func(t *testing.T) []byte { return fakeELF(t, elf.EM_X86_64, false) }, "an ELF binary for EM_X86_64, not EM_AARCH64"},
		{"a dynamically linked binary", func(t *testing.T) []byte { return fakeELF(t, elf.EM_AARCH64, true) }, "dynamically linked"},
		{"not an ELF file", func(t *testing.T) []byte { return []byte("#!/bin/sh\necho hi\n") }, "not an ELF file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "updater.tar")
			args := buildArgs(t, dir, out)
			writeFile(t, dir, "updater-arm64", tc.arm64(t))
			wantErrContaining(t, runErr(t, args...), tc.wantErr)
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused build left %s behind", out)
			}
		})
	}
}

func TestBuildRefusesMissingLabels(t *testing.T) {
	dir := t.TempDir()
	args := buildArgs(t, dir, filepath.Join(dir, "updater.tar"))
	var kept []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-label" && strings.HasPrefix(args[i+1], "org.opencontainers.image.licenses=") {
			i++
			continue
		}
		kept = append(kept, args[i])
	}
	wantErrContaining(t, runErr(t, kept...), "label org.opencontainers.image.licenses is required")
}

// tamper rebuilds the tar at file with the arm64 image changed by change.
func tamper(t *testing.T, file string, change func(v1.Image) v1.Image) {
	t.Helper()
	idx, _, tmp, err := openIndex(file)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var adds []mutate.IndexAddendum
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if d.Platform.Architecture == "arm64" {
			img = change(img)
			if img == nil {
				continue
			}
		}
		p := *d.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	out := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	out = mutate.Annotations(out, im.Annotations).(v1.ImageIndex)
	if err := writeLayoutTar(out, "0.1.0", file, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
}

func withConfig(t *testing.T, change func(*v1.ConfigFile)) func(v1.Image) v1.Image {
	return func(img v1.Image) v1.Image {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		change(cf)
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
}

func withFile(t *testing.T, e tarEntry) func(v1.Image) v1.Image {
	return func(img v1.Image) v1.Image {
		l, err := layerOf([]tarEntry{e}, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
}

func TestVerifyRefusesImagesThatBreakTheRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T) func(v1.Image) v1.Image
		verify  []string
		wantErr string
	}{
		{
			name: "runs as root",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withConfig(t, func(c *v1.ConfigFile) { c.Config.User = "" })
			},
			wantErr: `linux/arm64: user "", want "65532:65532"`,
		},
		{
			name: "runs as a user name, which runAsNonRoot cannot check",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withConfig(t, func(c *v1.ConfigFile) { c.Config.User = "nonroot" })
			},
			wantErr: `linux/arm64: user "nonroot"`,
		},
		{
			name: "another entrypoint",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withConfig(t, func(c *v1.ConfigFile) { c.Config.Entrypoint = []string{"/bin/sh", "-c"} })
			},
			wantErr: `linux/arm64: entrypoint ["/bin/sh" "-c"]`,
		},
		{
			name: "config of another architecture",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withConfig(t, func(c *v1.ConfigFile) { c.Architecture = "amd64" })
			},
			wantErr: "linux/arm64: config says linux/amd64",
		},
		{
			name: "a label missing from the config",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withConfig(t, func(c *v1.ConfigFile) { delete(c.Config.Labels, "org.opencontainers.image.revision") })
			},
			wantErr: "linux/arm64: config labels",
		},
		{
			name: "a shell in the image",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withFile(t, tarEntry{name: "bin/sh", mode: 0o755, data: fakeELF(t, elf.EM_AARCH64, false)})
			},
			wantErr: "linux/arm64: unexpected bin/sh",
		},
		{
			name: "a dynamically linked binary",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withFile(t, tarEntry{name: "updater", mode: 0o755, data: fakeELF(t, elf.EM_AARCH64, true)})
			},
			wantErr: "linux/arm64: /updater: dynamically linked",
		},
		{
			name: "a binary the nonroot user may replace",
			change: func(t *testing.T) func(v1.Image) v1.Image {
				return withFile(t, tarEntry{name: "updater", mode: 0o777, data: fakeELF(t, elf.EM_AARCH64, false)})
			},
			wantErr: "linux/arm64: updater has mode 777",
		},
		{
			name:    "a platform missing",
			change:  func(t *testing.T) func(v1.Image) v1.Image { return func(v1.Image) v1.Image { return nil } },
			wantErr: "index: no image for linux/arm64",
		},
		{
			name:    "another version than asked",
			change:  func(t *testing.T) func(v1.Image) v1.Image { return func(img v1.Image) v1.Image { return img } },
			verify:  []string{"-label", "org.opencontainers.image.version=0.2.0"},
			wantErr: `index annotations: org.opencontainers.image.version is "0.1.0", want "0.2.0"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "updater.tar")
			runOK(t, buildArgs(t, dir, out)...)
			tamper(t, out, tc.change(t))
			args := append(append([]string{"verify", "-name", "updater"}, tc.verify...), out)
			wantErrContaining(t, runErr(t, args...), tc.wantErr)
		})
	}
}

func TestVerifyRefusesAnArchiveLeavingItsDirectory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "evil.tar")
	var buf bytes.Buffer
	tw := newTestTar(&buf)
	tw("../../escaped", "x")
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	wantErrContaining(t, runErr(t, "verify", "-name", "updater", out), `entry "../../escaped" leaves the layout`)
}

// newTestTar returns a function adding one file to an uncompressed tar.
func newTestTar(w io.Writer) func(name, data string) {
	tw := tarWriter(w)
	return func(name, data string) {
		tw(tarEntry{name: name, mode: 0o644, data: []byte(data)})
	}
}

func tarWriter(w io.Writer) func(tarEntry) {
	return func(e tarEntry) {
		data, err := layerTar([]tarEntry{e}, time.Unix(0, 0))
		if err != nil {
			panic(err)
		}
		w.Write(data)
	}
}

func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestPushUploadsEveryPlatformToARegistry(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "updater.tar")
	built := strings.Fields(runOK(t, buildArgs(t, dir, out)...))[1]

	host := startRegistry(t)
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("the test registry listens on %s, not 127.0.0.1", host)
	}
	ref := host + "/vpa-inplace/updater:0.1.0"
	pushed := strings.TrimSpace(runOK(t, "push", out, ref))
	if pushed != ref+"@"+built {
		t.Errorf("push printed %q, want %q", pushed, ref+"@"+built)
	}

	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() != built {
		t.Errorf("the registry serves index %s, built %s", d, built)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := remote.Image(r, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}))
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch || cf.Config.User != "65532:65532" {
			t.Errorf("pulled %s: architecture %s user %q", arch, cf.Architecture, cf.Config.User)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			t.Errorf("pulled %s: %d layers (%v), want 2", arch, len(layers), err)
		}
	}
}

func TestPushReportsARegistryRefusal(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "updater.tar")
	runOK(t, buildArgs(t, dir, out)...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"errors":[{"code":"DENIED","message":"no push for you"}]}`, http.StatusForbidden)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	wantErrContaining(t, runErr(t, "push", out, host+"/vpa-inplace/updater:0.1.0"), "pushing", "no push for you")
}

func TestPushWantsAnExplicitTag(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "updater.tar")
	runOK(t, buildArgs(t, dir, out)...)
	runErr(t, "push", out, startRegistry(t)+"/vpa-inplace/updater")
}

func TestRegistryCommandServesPushesUntilStopped(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "updater.tar")
	built := strings.Fields(runOK(t, buildArgs(t, dir, out)...))[1]

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrFile := filepath.Join(dir, "addr")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"registry", "-addr-file", addrFile}, io.Discard, io.Discard) }()
	var host string
	for deadline := time.Now().Add(10 * time.Second); host == ""; {
		if data, err := os.ReadFile(addrFile); err == nil {
			host = strings.TrimSpace(string(data))
		} else if time.Now().After(deadline) {
			t.Fatal("the registry did not write its address")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("the registry listens on %s, not 127.0.0.1", host)
	}
	ref := host + "/vpa-inplace/updater:0.1.0"
	if got := strings.TrimSpace(runOK(t, "push", out, ref)); got != ref+"@"+built {
		t.Errorf("push printed %q, want %q", got, ref+"@"+built)
	}
	// A connection opened and never used, as a client's spare dial leaves
	// one: the registry still stops, without error.
	spare, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the registry stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the registry did not stop")
	}
}
