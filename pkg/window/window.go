// Package window reads the resize windows and freezes of InPlace VPAs, the
// annotations a VPA or its namespace may carry:
//
//	vpa-inplace.dev/resize-window: "Mon-Fri 01:00-05:00 Europe/Berlin; Sat,Sun 00:00-24:00 UTC"
//	vpa-inplace.dev/resize-window-scope: decreases | all
//	vpa-inplace.dev/freeze-until: "2026-12-27T06:00:00+01:00"
//
// It parses them, bounded before anything else (they are tenant input), and
// tells whether a moment lies inside a schedule's windows and when they open
// next. It is pure: no clock (every time is given), no client. The updater's
// use of it (which resizes wait, timers, events) is pkg/updater/window.
package window

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	// Time zones are read from the binary itself when the system has none
	// (the distroless images have no /usr/share/zoneinfo).
	_ "time/tzdata"
)

// The annotations, on a VPA or on its namespace.
const (
	// WindowAnnotation lists the windows in which decreases and resizes that
	// restart containers may be sent.
	WindowAnnotation = "vpa-inplace.dev/resize-window"
	// ScopeAnnotation says which resizes the windows beside it hold:
	// ScopeDecreases (the default) or ScopeAll.
	ScopeAnnotation = "vpa-inplace.dev/resize-window-scope"
	// FreezeAnnotation stops every resize until the time it names.
	FreezeAnnotation = "vpa-inplace.dev/freeze-until"
)

// Bounds of what is read. A longer value, or more windows, is invalid
// before it is parsed.
const (
	// MaxValueLength bounds a resize-window value, in bytes.
	MaxValueLength = 1024
	// MaxWindows bounds the windows of one value.
	MaxWindows = 16
	// MaxZoneLength bounds a time zone's name.
	MaxZoneLength = 64
	// MaxFreezeLength bounds a freeze-until value (an RFC 3339 time with
	// nanoseconds and an offset is 35 bytes).
	MaxFreezeLength = 64
	// maxScopeLength bounds a resize-window-scope value.
	maxScopeLength = 32
	// Horizon is how far NextOpen looks: every window recurs within a week.
	Horizon = 8 * 24 * time.Hour
	// DefaultMaxFreeze is the default of how far ahead a freeze may end.
	DefaultMaxFreeze = 30 * 24 * time.Hour
)

// Scope says which resizes a schedule holds outside its windows.
type Scope string

const (
	// ScopeDecreases: resizes that lower a value or restart a container;
	// increases that restart nothing go at any time.
	ScopeDecreases Scope = "decreases"
	// ScopeAll: every resize.
	ScopeAll Scope = "all"
)

// ParseScope reads a resize-window-scope value; "" is ScopeDecreases.
func ParseScope(value string) (Scope, error) {
	if len(value) > maxScopeLength {
		return "", fmt.Errorf("%s is %d bytes long, more than %d", ScopeAnnotation, len(value), maxScopeLength)
	}
	switch s := Scope(strings.ToLower(strings.TrimSpace(value))); s {
	case "", ScopeDecreases:
		return ScopeDecreases, nil
	case ScopeAll:
		return ScopeAll, nil
	default:
		return "", fmt.Errorf("%s %s: want %q or %q", ScopeAnnotation, quote(value), ScopeDecreases, ScopeAll)
	}
}

// Schedule is a parsed resize-window value: the union of its windows. The
// zero Schedule restricts nothing (no annotation): it is always open.
type Schedule struct {
	windows []window
}

// window opens on each of its days at start, local time in loc, and closes
// at end: the same day when end is after start, else the next day.
type window struct {
	days       [7]bool // by time.Weekday
	start, end int     // seconds after local midnight; end may be 86400 (24:00)
	loc        *time.Location
}

const day = 24 * 60 * 60

// IsZero tells whether s restricts nothing.
func (s Schedule) IsZero() bool { return len(s.windows) == 0 }

// Parse reads a resize-window value: windows separated by ";", each
// "DAYS START-END ZONE". DAYS is "*" or a comma-separated list of days
// (Mon, Tue, ... Sun) and ranges of days ("Mon-Fri", "Fri-Mon"); START and
// END are HH:MM or HH:MM:SS, END may be 24:00, and an END not after START
// ends the window the next day; ZONE is an IANA time zone ("Europe/Berlin",
// "UTC"). The value is bounded (MaxValueLength, MaxWindows) before it is
// parsed.
func Parse(value string) (Schedule, error) {
	if len(value) > MaxValueLength {
		return Schedule{}, fmt.Errorf("%s is %d bytes long, more than %d", WindowAnnotation, len(value), MaxValueLength)
	}
	if n := strings.Count(value, ";") + 1; n > MaxWindows {
		return Schedule{}, fmt.Errorf("%s lists %d windows, more than %d", WindowAnnotation, n, MaxWindows)
	}
	var s Schedule
	for part := range strings.SplitSeq(value, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		w, err := parseWindow(part)
		if err != nil {
			return Schedule{}, fmt.Errorf("%s window %s: %w", WindowAnnotation, quote(strings.TrimSpace(part)), err)
		}
		s.windows = append(s.windows, w)
	}
	if len(s.windows) == 0 {
		return Schedule{}, fmt.Errorf("%s lists no window", WindowAnnotation)
	}
	return s, nil
}

func parseWindow(part string) (window, error) {
	fields := strings.Fields(part)
	if len(fields) != 3 {
		return window{}, errors.New(`want "DAYS START-END ZONE", e.g. "Mon-Fri 01:00-05:00 Europe/Berlin"`)
	}
	var w window
	var err error
	if w.days, err = parseDays(fields[0]); err != nil {
		return window{}, err
	}
	from, to, ok := strings.Cut(fields[1], "-")
	if !ok {
		return window{}, fmt.Errorf("times %s: want START-END, e.g. 01:00-05:00", quote(fields[1]))
	}
	if w.start, err = parseClock(from, false); err != nil {
		return window{}, err
	}
	if w.end, err = parseClock(to, true); err != nil {
		return window{}, err
	}
	if w.start == w.end {
		return window{}, fmt.Errorf("times %s: the window starts and ends at the same time (00:00-24:00 is a whole day)", quote(fields[1]))
	}
	if w.loc, err = loadZone(fields[2]); err != nil {
		return window{}, err
	}
	return w, nil
}

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

func parseDay(s string) (time.Weekday, error) {
	d, ok := dayNames[strings.ToLower(s)]
	if !ok {
		return 0, fmt.Errorf("day %s: want Mon, Tue, Wed, Thu, Fri, Sat or Sun", quote(s))
	}
	return d, nil
}

func parseDays(s string) ([7]bool, error) {
	var days [7]bool
	if s == "*" {
		return [7]bool{true, true, true, true, true, true, true}, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		from, to, isRange := strings.Cut(item, "-")
		first, err := parseDay(from)
		if err != nil {
			return days, err
		}
		last := first
		if isRange {
			if last, err = parseDay(to); err != nil {
				return days, err
			}
		}
		// A range may wrap around the week: Fri-Mon is Fri, Sat, Sun, Mon.
		for d := first; ; d = (d + 1) % 7 {
			days[d] = true
			if d == last {
				break
			}
		}
	}
	return days, nil
}

// parseClock reads HH:MM or HH:MM:SS as seconds after midnight; 24:00 (and
// 24:00:00) only as an end.
func parseClock(s string, end bool) (int, error) {
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("time %s: want HH:MM or HH:MM:SS, 00:00 to 23:59:59 (24:00 as an end)", quote(s))
	if len(parts) < 2 || len(parts) > 3 {
		return 0, bad
	}
	var n [3]int
	for i, p := range parts {
		if len(p) != 2 {
			return 0, bad
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return 0, bad
		}
		n[i] = v
	}
	h, m, sec := n[0], n[1], n[2]
	if end && h == 24 && m == 0 && sec == 0 {
		return day, nil
	}
	if h > 23 || m > 59 || sec > 59 {
		return 0, bad
	}
	return h*3600 + m*60 + sec, nil
}

// loadZone loads an IANA time zone. "Local" (the updater's own zone) is
// refused: a window means the same wherever the updater runs.
func loadZone(name string) (*time.Location, error) {
	if len(name) > MaxZoneLength {
		return nil, fmt.Errorf("time zone is %d bytes long, more than %d", len(name), MaxZoneLength)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/_+-", r)) {
			return nil, fmt.Errorf("time zone %s: not an IANA time zone name (e.g. Europe/Berlin, UTC)", quote(name))
		}
	}
	if name == "Local" {
		return nil, errors.New(`time zone "Local" is the updater's own: name an IANA time zone (e.g. Europe/Berlin, UTC)`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %s: unknown (want an IANA time zone, e.g. Europe/Berlin, UTC)", quote(name))
	}
	return loc, nil
}

// occurrence returns the window's opening on local date y-m-d (whatever its
// day) and its closing.
func (w window) occurrence(y int, m time.Month, d int) (time.Time, time.Time) {
	at := func(d, secs int) time.Time {
		return time.Date(y, m, d, secs/3600, secs%3600/60, secs%60, 0, w.loc)
	}
	if w.end > w.start {
		return at(d, w.start), at(d, w.end)
	}
	return at(d, w.start), at(d+1, w.end)
}

// on tells whether the window opens on local date y-m-d.
func (w window) on(y int, m time.Month, d int) bool {
	// At noon: no time zone moves its clocks then.
	return w.days[time.Date(y, m, d, 12, 0, 0, 0, w.loc).Weekday()]
}

func (w window) open(t time.Time) bool {
	y, m, d := t.In(w.loc).Date()
	// Opened today, or yesterday and not yet closed.
	for _, off := range []int{0, -1} {
		if !w.on(y, m, d+off) {
			continue
		}
		if s, e := w.occurrence(y, m, d+off); !t.Before(s) && t.Before(e) {
			return true
		}
	}
	return false
}

// starts appends the openings of the window after t and up to t+Horizon.
func (w window) starts(t time.Time, out []time.Time) []time.Time {
	y, m, d := t.In(w.loc).Date()
	limit := t.Add(Horizon)
	for off := 0; off <= 8; off++ {
		if !w.on(y, m, d+off) {
			continue
		}
		s, e := w.occurrence(y, m, d+off)
		if s.After(t) && !s.After(limit) && e.After(s) {
			out = append(out, s)
		}
	}
	return out
}

// Open tells whether t lies inside one of s's windows; the zero Schedule
// is always open.
func (s Schedule) Open(t time.Time) bool {
	if s.IsZero() {
		return true
	}
	for _, w := range s.windows {
		if w.open(t) {
			return true
		}
	}
	return false
}

// NextOpen returns the first moment from t on at which every schedule is
// open: t itself when they all are, the first opening within Horizon when
// one opens later, and false when they are never open together within it.
func NextOpen(t time.Time, schedules ...Schedule) (time.Time, bool) {
	open := func(at time.Time) bool {
		for _, s := range schedules {
			if !s.Open(at) {
				return false
			}
		}
		return true
	}
	if open(t) {
		return t, true
	}
	// Where windows meet, the meeting opens when one of them opens.
	var candidates []time.Time
	for _, s := range schedules {
		for _, w := range s.windows {
			candidates = w.starts(t, candidates)
		}
	}
	slices.SortFunc(candidates, time.Time.Compare)
	for _, c := range candidates {
		if open(c) {
			return c, true
		}
	}
	return time.Time{}, false
}

// ParseFreeze reads a freeze-until value: the end of the freeze, an RFC 3339
// time no more than max after now. A time already past is valid: the
// freeze is over. The value is bounded (MaxFreezeLength) before it is
// parsed.
func ParseFreeze(value string, now time.Time, max time.Duration) (time.Time, error) {
	if len(value) > MaxFreezeLength {
		return time.Time{}, fmt.Errorf("%s is %d bytes long, more than %d", FreezeAnnotation, len(value), MaxFreezeLength)
	}
	until, err := time.Parse(time.RFC3339, strings.TrimSpace(value))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %s: want an RFC 3339 time, e.g. 2026-12-27T06:00:00+01:00", FreezeAnnotation, quote(value))
	}
	if until.Sub(now) > max {
		return time.Time{}, fmt.Errorf("%s %s is more than %s ahead (the most a freeze may last)", FreezeAnnotation, quote(value), max)
	}
	return until, nil
}

// quote quotes s for an error message, cut to 64 bytes.
func quote(s string) string {
	const n = 64
	if len(s) > n {
		return strconv.Quote(s[:n]) + "..."
	}
	return strconv.Quote(s)
}
