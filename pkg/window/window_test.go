package window

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

func TestParseRefuses(t *testing.T) {
	cases := map[string]struct {
		value, want string
	}{
		"empty":                 {"", "lists no window"},
		"only separators":       {" ; ;", "lists no window"},
		"too long":              {strings.Repeat("x", MaxValueLength+1), "more than 1024"},
		"too many windows":      {strings.Repeat("Mon 01:00-02:00 UTC;", MaxWindows) + "Mon 01:00-02:00 UTC", "17 windows, more than 16"},
		"two fields":            {"Mon-Fri 01:00-05:00", `want "DAYS START-END ZONE"`},
		"four fields":           {"Mon 01:00 - 05:00 UTC", `want "DAYS START-END ZONE"`},
		"unknown day":           {"Monday 01:00-05:00 UTC", `day "Monday"`},
		"empty day in list":     {"Mon,,Tue 01:00-05:00 UTC", `day ""`},
		"no range":              {"Mon 01:00 UTC", `want START-END`},
		"hour 25":               {"Mon 25:00-26:00 UTC", `time "25:00"`},
		"minute 60":             {"Mon 01:60-02:00 UTC", `time "01:60"`},
		"one digit":             {"Mon 1:00-02:00 UTC", `time "1:00"`},
		"24:00 as a start":      {"Mon 24:00-01:00 UTC", `time "24:00"`},
		"24:01 as an end":       {"Mon 23:00-24:01 UTC", `time "24:01"`},
		"negative":              {"Mon -1:00-02:00 UTC", `time ""`},
		"same start and end":    {"Mon 01:00-01:00 UTC", "starts and ends at the same time"},
		"unknown zone":          {"Mon 01:00-05:00 Mars/Olympus", `time zone "Mars/Olympus": unknown`},
		"local zone":            {"Mon 01:00-05:00 Local", `"Local" is the updater's own`},
		"path in zone":          {"Mon 01:00-05:00 ../../etc/passwd", "not an IANA time zone name"},
		"absolute path in zone": {"Mon 01:00-05:00 /etc/localtime", "unknown"},
		"zone too long":         {"Mon 01:00-05:00 " + strings.Repeat("A", MaxZoneLength+1), "more than 64"},
		"one bad of two":        {"Mon 01:00-05:00 UTC; Tue 01:00-05:00 Nowhere", `window "Tue 01:00-05:00 Nowhere"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(c.value)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestOpen(t *testing.T) {
	cases := []struct {
		name, value string
		open        []string
		closed      []string
	}{
		{
			name:   "weekdays in Berlin (winter, UTC+1)",
			value:  "Mon-Fri 01:00-05:00 Europe/Berlin",
			open:   []string{"2026-01-05T00:00:00Z", "2026-01-05T03:59:59Z", "2026-01-09T00:30:00Z"},
			closed: []string{"2026-01-04T23:59:59Z", "2026-01-05T04:00:00Z", "2026-01-10T01:00:00Z", "2026-01-11T02:00:00Z"},
		},
		{
			name:   "weekdays in Berlin (summer, UTC+2)",
			value:  "Mon-Fri 01:00-05:00 Europe/Berlin",
			open:   []string{"2026-07-06T01:00:00+02:00", "2026-07-05T23:00:00Z"},
			closed: []string{"2026-07-06T03:00:00Z"},
		},
		{
			name:   "across midnight: opens on the day named, closes the next",
			value:  "Fri 22:00-02:00 UTC",
			open:   []string{"2026-01-09T22:00:00Z", "2026-01-10T01:59:59Z"},
			closed: []string{"2026-01-09T21:59:59Z", "2026-01-10T02:00:00Z", "2026-01-08T23:00:00Z", "2026-01-09T01:00:00Z"},
		},
		{
			name:   "whole days",
			value:  "Sat,Sun 00:00-24:00 UTC",
			open:   []string{"2026-01-10T00:00:00Z", "2026-01-11T23:59:59Z"},
			closed: []string{"2026-01-09T23:59:59Z", "2026-01-12T00:00:00Z"},
		},
		{
			name:   "a range wrapping around the week",
			value:  "Fri-Mon 12:00-13:00 UTC",
			open:   []string{"2026-01-09T12:00:00Z", "2026-01-10T12:30:00Z", "2026-01-11T12:30:00Z", "2026-01-12T12:59:59Z"},
			closed: []string{"2026-01-13T12:30:00Z", "2026-01-14T12:30:00Z", "2026-01-15T12:30:00Z"},
		},
		{
			name:   "every day, to the second",
			value:  "* 10:00:30-10:01:00 UTC",
			open:   []string{"2026-01-07T10:00:30Z", "2026-01-08T10:00:59Z"},
			closed: []string{"2026-01-07T10:00:29Z", "2026-01-07T10:01:00Z"},
		},
		{
			name:   "several windows, their union",
			value:  "Mon 01:00-02:00 UTC; Tue 03:00-04:00 Asia/Tokyo",
			open:   []string{"2026-01-05T01:30:00Z", "2026-01-05T18:30:00Z"},
			closed: []string{"2026-01-06T03:30:00Z"},
		},
		{
			name:   "case and spaces do not matter",
			value:  "  mon-FRI   01:00-05:00   UTC ;",
			open:   []string{"2026-01-05T01:00:00Z"},
			closed: []string{"2026-01-05T05:00:00Z"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(c.value)
			require.NoError(t, err)
			for _, o := range c.open {
				assert.True(t, s.Open(at(t, o)), "open at %s", o)
			}
			for _, o := range c.closed {
				assert.False(t, s.Open(at(t, o)), "closed at %s", o)
			}
		})
	}
}

func TestZeroScheduleIsAlwaysOpen(t *testing.T) {
	var s Schedule
	assert.True(t, s.IsZero())
	assert.True(t, s.Open(time.Unix(0, 0)))
	got, ok := NextOpen(time.Unix(0, 0), s, Schedule{})
	require.True(t, ok)
	assert.Equal(t, time.Unix(0, 0), got)
}

// The clocks move: a window keeps its local times, so it lasts an hour less
// on the night the clocks go forward and an hour more when they go back.
func TestOpenAcrossDaylightSaving(t *testing.T) {
	s, err := Parse("Sun 01:00-05:00 Europe/Berlin")
	require.NoError(t, err)
	// 2026-03-29: 02:00 CET becomes 03:00 CEST. 01:00 CET = 00:00Z, 05:00 CEST = 03:00Z.
	assert.False(t, s.Open(at(t, "2026-03-28T23:59:59Z")))
	assert.True(t, s.Open(at(t, "2026-03-29T00:00:00Z")))
	assert.True(t, s.Open(at(t, "2026-03-29T02:59:59Z")))
	assert.False(t, s.Open(at(t, "2026-03-29T03:00:00Z")))
	// 2026-10-25: 03:00 CEST becomes 02:00 CET. 01:00 CEST = 23:00Z (Sat), 05:00 CET = 04:00Z.
	assert.False(t, s.Open(at(t, "2026-10-24T22:59:59Z")))
	assert.True(t, s.Open(at(t, "2026-10-24T23:00:00Z")))
	assert.True(t, s.Open(at(t, "2026-10-25T03:59:59Z")))
	assert.False(t, s.Open(at(t, "2026-10-25T04:00:00Z")))

	next, ok := NextOpen(at(t, "2026-03-28T12:00:00Z"), s)
	require.True(t, ok)
	assert.Equal(t, at(t, "2026-03-29T00:00:00Z"), next.UTC())
}

func TestNextOpen(t *testing.T) {
	berlin, err := Parse("Mon-Fri 01:00-05:00 Europe/Berlin")
	require.NoError(t, err)
	utc, err := Parse("* 03:30-06:00 UTC")
	require.NoError(t, err)
	weekend, err := Parse("Sat,Sun 00:00-24:00 UTC")
	require.NoError(t, err)
	cases := []struct {
		name      string
		from      string
		schedules []Schedule
		want      string // "" for never
	}{
		{"open now: now", "2026-01-05T02:00:00Z", []Schedule{berlin}, "2026-01-05T02:00:00Z"},
		{"later the same night", "2026-01-04T23:00:00Z", []Schedule{berlin}, "2026-01-05T00:00:00Z"},
		{"Friday after the window: Monday", "2026-01-09T05:00:00Z", []Schedule{berlin}, "2026-01-12T00:00:00Z"},
		{"both open together: the later opening", "2026-01-05T00:00:00Z", []Schedule{berlin, utc}, "2026-01-05T03:30:00Z"},
		{"one open, the other opens", "2026-01-05T03:45:00Z", []Schedule{berlin, utc}, "2026-01-05T03:45:00Z"},
		{"never together", "2026-01-05T00:00:00Z", []Schedule{berlin, weekend}, ""},
		{"with the zero schedule", "2026-01-04T23:00:00Z", []Schedule{{}, berlin}, "2026-01-05T00:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := NextOpen(at(t, c.from), c.schedules...)
			if c.want == "" {
				assert.False(t, ok, "opens at %s", got)
				return
			}
			require.True(t, ok)
			assert.Equal(t, at(t, c.want), got.UTC())
		})
	}
}

func TestParseFreeze(t *testing.T) {
	now := at(t, "2026-12-01T00:00:00Z")
	cases := []struct {
		name, value, want, err string
	}{
		{name: "in a week", value: "2026-12-08T00:00:00+01:00", want: "2026-12-07T23:00:00Z"},
		{name: "with fractions and spaces", value: " 2026-12-08T00:00:00.5Z ", want: "2026-12-08T00:00:00.5Z"},
		{name: "past: valid, the freeze is over", value: "2026-11-01T00:00:00Z", want: "2026-11-01T00:00:00Z"},
		{name: "at the bound", value: "2026-12-31T00:00:00Z", want: "2026-12-31T00:00:00Z"},
		{name: "beyond the bound", value: "2026-12-31T00:00:01Z", err: "more than 720h0m0s ahead"},
		{name: "a date only", value: "2026-12-08", err: "want an RFC 3339 time"},
		{name: "no offset", value: "2026-12-08T00:00:00", err: "want an RFC 3339 time"},
		{name: "too long", value: strings.Repeat("9", MaxFreezeLength+1), err: "more than 64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseFreeze(c.value, now, DefaultMaxFreeze)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, at(t, c.want), got.UTC())
		})
	}
}

func TestParseScope(t *testing.T) {
	for value, want := range map[string]Scope{"": ScopeDecreases, "decreases": ScopeDecreases, " All ": ScopeAll} {
		got, err := ParseScope(value)
		require.NoError(t, err, value)
		assert.Equal(t, want, got, value)
	}
	for _, value := range []string{"increases", "none", strings.Repeat("a", 40)} {
		_, err := ParseScope(value)
		assert.Error(t, err, value)
	}
}

// Whatever a tenant writes, parsing returns (a schedule or an error), and a
// schedule answers Open and NextOpen without looping.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"Mon-Fri 01:00-05:00 Europe/Berlin", "* 00:00-24:00 UTC; Sat 22:00-02:00 Asia/Tokyo",
		"Fri-Mon 23:59:59-00:00:01 America/New_York", "Mon 01:00-05:00 Local", ";;", "Sun 02:30-03:30 Europe/Berlin"} {
		f.Add(s)
	}
	from := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string) {
		s, err := Parse(value)
		if err != nil {
			return
		}
		if len(value) > MaxValueLength {
			t.Fatalf("parsed a value of %d bytes", len(value))
		}
		for i := range 3 {
			at := from.Add(time.Duration(i) * 13 * time.Hour)
			next, ok := NextOpen(at, s)
			if ok && (next.Before(at) || !s.Open(next)) {
				t.Fatalf("NextOpen(%s) = %s, not open or before", at, next)
			}
		}
	})
}
