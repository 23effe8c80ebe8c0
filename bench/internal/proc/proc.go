// Package proc reads the memory and CPU use of a process from /proc.
package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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
