// Package proc reads the memory and CPU use of a process from /proc.
package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// Stats is one reading of a process.
type Stats struct {
	// PeakRSS is VmHWM: the largest resident set size so far.
	PeakRSS int64
	// RSS is VmRSS: the resident set size now.
	RSS int64
	// Anon and File are RssAnon and RssFile, the parts of RSS now that are
	// the process's own memory (heap, stacks) and pages of mapped files
	// (for a Go binary, mostly its own code and read-only data).
	Anon, File int64
	// CPU is user plus system time so far.
	CPU time.Duration
}

// Read reads the stats of pid.
func Read(pid int) (Stats, error) {
	var s Stats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "VmHWM":
			s.PeakRSS, err = kib(value)
		case "VmRSS":
			s.RSS, err = kib(value)
		case "RssAnon":
			s.Anon, err = kib(value)
		case "RssFile":
			s.File, err = kib(value)
		}
		if err != nil {
			return s, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) may hold spaces: fields after it are
	// counted from the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return s, fmt.Errorf("/proc/%d/stat utime: %w", pid, err)
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	if err != nil {
		return s, fmt.Errorf("/proc/%d/stat stime: %w", pid, err)
	}
	s.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	return s, nil
}

// kib parses "  123456 kB" into bytes.
func kib(v string) (int64, error) {
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("unexpected value %q", v)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	return n * 1024, err
}

// DropCache writes back and then drops the page cache of the file at path.
// Started right after, a process maps its binary from a cold cache: how much
// of the binary's code is resident (RssFile, part of VmHWM) then depends on
// what the process runs, not on how the file came into the cache: a binary
// just built can show megabytes more of it resident than the same file read
// back from disk.
func DropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("%s: fadvise: %w", path, err)
	}
	return nil
}

// Sampler reads a process's memory at an interval and keeps the largest
// anonymous and file-backed resident sizes seen: VmHWM is the peak of their
// sum only.
type Sampler struct {
	pid      int
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	mu                 sync.Mutex
	peakAnon, peakFile int64
}

// Sample starts sampling pid every interval until Stop.
func Sample(pid int, every time.Duration) *Sampler {
	s := &Sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	s.read()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.read()
			}
		}
	}()
	return s
}

func (s *Sampler) read() {
	st, err := Read(s.pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peakAnon = max(s.peakAnon, st.Anon)
	s.peakFile = max(s.peakFile, st.File)
}

// Peaks takes a sample and returns the peaks so far, sampling on.
func (s *Sampler) Peaks() (peakAnon, peakFile int64) {
	s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakAnon, s.peakFile
}

// Stop stops sampling, takes a last sample and returns the peaks. It may be
// called more than once.
func (s *Sampler) Stop() (peakAnon, peakFile int64) {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakAnon, s.peakFile
}

// Machine is the CPU time of the whole machine, every CPU together, since
// boot: Busy is the time spent running anything (user, nice, system, irq,
// softirq, steal), Total adds idle and iowait.
type Machine struct {
	Busy, Total time.Duration
}

// ReadMachine reads the first line of /proc/stat.
func ReadMachine() (Machine, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, err
	}
	return parseMachine(string(b))
}

// parseMachine reads the "cpu" line of a /proc/stat: user nice system idle
// iowait irq softirq steal [guest guest_nice], in USER_HZ (guest time is
// already in user).
func parseMachine(stat string) (Machine, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return Machine{}, fmt.Errorf("/proc/stat: no cpu line with 8 fields: %q", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil || n < 0 {
			return Machine{}, fmt.Errorf("/proc/stat: field %d of the cpu line: %q", i+1, f[i+1])
		}
		v[i] = n
	}
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	total := busy + v[3] + v[4]
	tick := time.Second / clockTicks
	return Machine{Busy: time.Duration(busy) * tick, Total: time.Duration(total) * tick}, nil
}

// ReadPIDFile reads a pid file whose first field is the process id (the
// local cluster's pid files add the process's start time after it) and
// checks that the process runs and its command name begins with comm.
func ReadPIDFile(path, comm string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s: empty", path)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: %q is not a process id", path, f[0])
	}
	name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0, fmt.Errorf("%s: process %d: %w", path, pid, err)
	}
	if got := strings.TrimSpace(string(name)); !strings.HasPrefix(got, comm) {
		return 0, fmt.Errorf("%s: process %d is %q, not %s", path, pid, got, comm)
	}
	return pid, nil
}
