package proc

import (
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
