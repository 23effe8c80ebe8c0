package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestReadSplitsRSS(t *testing.T) {
	s, err := Read(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, s.Anon)
	assert.Positive(t, s.File)
	assert.LessOrEqual(t, s.Anon+s.File, s.RSS+64<<10, "RssAnon + RssFile (+ RssShmem) is VmRSS")
	assert.GreaterOrEqual(t, s.PeakRSS, s.RSS)
}

func TestSamplerKeepsTheAnonymousPeak(t *testing.T) {
	s := Sample(os.Getpid(), 10*time.Millisecond)
	const size = 64 << 20
	b := make([]byte, size)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	time.Sleep(100 * time.Millisecond)
	runtime.KeepAlive(b)
	sofar, _ := s.Peaks()
	assert.GreaterOrEqual(t, sofar, int64(size), "the peak so far, sampling on")
	anon, file := s.Stop()
	assert.GreaterOrEqual(t, anon, int64(size), "the 64 MiB touched were resident while sampled")
	assert.Positive(t, file)
	again, _ := s.Stop()
	assert.GreaterOrEqual(t, again, anon, "a second Stop returns the peak again")
}

func TestDropCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, make([]byte, 1<<20), 0o600))
	if n := resident(t, path); n == 0 {
		t.Fatal("the file just written is not in the page cache: nothing to drop")
	}
	require.NoError(t, DropCache(path))
	var fs unix.Statfs_t
	require.NoError(t, unix.Statfs(path, &fs))
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("a tmpfs file lives in the page cache: there is no cache to drop")
	}
	assert.Zero(t, resident(t, path), "pages of the file still cached")
	assert.Error(t, DropCache(filepath.Join(t.TempDir(), "missing")))
}

// resident counts the pages of the file at path in the page cache.
func resident(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestParseMachine(t *testing.T) {
	m, err := parseMachine("cpu  100 20 30 400 50 6 7 8 9 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n")
	require.NoError(t, err)
	assert.Equal(t, 1710*time.Millisecond, m.Busy, "user, nice, system, irq, softirq, steal")
	assert.Equal(t, 6210*time.Millisecond, m.Total, "and idle and iowait")
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8", "cpu 1 2 -3 4 5 6 7 8"} {
		_, err := parseMachine(bad)
		assert.Error(t, err, "%q", bad)
	}
	live, err := ReadMachine()
	require.NoError(t, err)
	assert.Greater(t, live.Total, live.Busy)
}

func TestReadPIDFile(t *testing.T) {
	dir := t.TempDir()
	self, err := os.ReadFile("/proc/self/comm")
	require.NoError(t, err)
	comm := string(self[:min(4, len(self)-1)])
	file := func(content string) string {
		path := filepath.Join(dir, "p.pid")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	pid, err := ReadPIDFile(file(fmt.Sprintf("%d 12345\n", os.Getpid())), comm)
	require.NoError(t, err, "the pid, then the start time")
	assert.Equal(t, os.Getpid(), pid)
	_, err = ReadPIDFile(file(fmt.Sprintf("%d\n", os.Getpid())), "kube-apiserver")
	assert.Error(t, err, "another process than the one named")
	for _, bad := range []string{"", "x 1", "-3", "0"} {
		_, err := ReadPIDFile(file(bad), comm)
		assert.Error(t, err, "%q", bad)
	}
	_, err = ReadPIDFile(filepath.Join(dir, "missing"), comm)
	assert.Error(t, err)
}
