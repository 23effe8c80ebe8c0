package records

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// An annotation is written by the updater, but anyone who may edit a VPA
// may edit it too: what it holds is untrusted input. The decoder bounds what
// it reads before reading it, keeps only records that are well formed and
// drops the others one by one, each counted under a DropReason.
//
// The encoders write no more than the decoders read: EncodeAnnotation and
// EncodeCompact leave the oldest records out (and return them) rather than
// write past MaxEntries, MaxAttempts (MaxCompactEntries, MaxCompactAttempts)
// or the value's size.
const (
	// MaxAttempts bounds the attempts of one annotation. Attempts are shared
	// by the pods of a workload; a few per VPA is the rule, but memory
	// records carry each pod's usage in their message, an attempt per pod.
	MaxAttempts = 256
	// MaxEntries bounds the records (pods and Jobs) of one annotation.
	MaxEntries = 4096
	// MaxContainers bounds the containers of one attempt.
	MaxContainers = 32
	// MaxUIDLength is the length of the UIDs the API server generates (RFC
	// 4122 UUIDs in text). Longer keys are no UID.
	MaxUIDLength = 36
	// FutureSkew is how far in the future a record's time may be (clocks
	// of two replicas differ). A record from further ahead would win over
	// every newer one: it is dropped.
	FutureSkew = 5 * time.Minute
)

// DropReason says why a record, or a whole annotation, was not kept.
type DropReason string

const (
	// DropTooLarge: the annotation is longer than the store reads.
	DropTooLarge DropReason = "TooLarge"
	// DropUnreadable: the annotation is not the JSON of a known version.
	DropUnreadable DropReason = "Unreadable"
	// DropTooMany: beyond the records (MaxEntries) or attempts
	// (MaxAttempts) a value may hold; the records of an attempt past the
	// bound count one by one.
	DropTooMany DropReason = "TooMany"
	// DropBadUID: the key is not shaped like a UID.
	DropBadUID DropReason = "BadUID"
	// DropBadAttempt: the record refers to an attempt that does not exist.
	DropBadAttempt DropReason = "BadAttempt"
	// DropUnknownKind: the attempt's kind is none of the Kind constants.
	DropUnknownKind DropReason = "UnknownKind"
	// DropBadResources: the attempt names no value, too many containers, a
	// resource other than cpu and memory, or a quantity that is refused by
	// quantity.Check or does not parse.
	DropBadResources DropReason = "BadResources"
	// DropBadWatch: the watch of a safety record (Record.Watch) is missing
	// on a KindWatch record, on a kind that has none, or past its bounds
	// (MaxWatchLowerings, MaxWatchRestarts, a container's name, a count
	// below 0, a time too far from the record's).
	DropBadWatch DropReason = "BadWatch"
	// DropBadStarts: the restart counts of a limit at start
	// (Record.Starts) are missing on a KindLimitAtStart record, present on
	// another kind, or do not name exactly its containers' memory limits.
	DropBadStarts DropReason = "BadStarts"
	// DropBadTime: the record's time is not an RFC 3339 time.
	DropBadTime DropReason = "BadTime"
	// DropFuture: the record's time is more than FutureSkew ahead.
	DropFuture DropReason = "Future"
	// DropNotOwned: the UID is no live pod or Job of the namespace of the
	// VPA carrying the record (VPAStoreConfig.Live), or, when the pod is
	// synced, its VPA is another (Store.GetFor).
	DropNotOwned DropReason = "NotOwned"
)

// Decoded is what DecodeAnnotation kept of an annotation, and how many
// records it dropped, by reason. A whole annotation that cannot be read
// counts as one drop.
type Decoded struct {
	Records map[types.UID]*Record
	Dropped map[DropReason]int
	// Legacy counts the records kept that were read in an earlier
	// version's shape (a canary's watch start beside its watch, or no
	// watch): their value is to be written again.
	Legacy int
}

// DroppedTotal is the number of drops of all reasons.
func (d Decoded) DroppedTotal() int {
	n := 0
	for _, c := range d.Dropped {
		n += c
	}
	return n
}

func (d *Decoded) drop(reason DropReason, n int) {
	if n <= 0 {
		return
	}
	if d.Dropped == nil {
		d.Dropped = map[DropReason]int{}
	}
	d.Dropped[reason] += n
}

// DecodeOptions bound and filter what DecodeAnnotation keeps.
type DecodeOptions struct {
	// MaxBytes is the longest value read; 0 means
	// DefaultMaxAnnotationBytes. A longer one is dropped whole, unread.
	MaxBytes int
	// Now is the time records may not be more than FutureSkew ahead of.
	// Zero: no check.
	Now time.Time
	// Keep tells whether a well-formed record of uid is kept; nil keeps
	// every one. It is asked before the record's quantities are parsed.
	Keep func(uid types.UID) bool
	// MaxEntries bounds the records kept; 0 means MaxEntries. Records past
	// it are dropped (DropTooMany).
	MaxEntries int
	// MaxAttempts bounds the attempts read; 0 means MaxAttempts. The
	// records of the attempts past it are dropped (DropTooMany).
	MaxAttempts int
}

// rawDoc is annotationDoc with the resources kept as strings, so that every
// quantity is bounded before it is parsed.
type rawDoc struct {
	Version  int                 `json:"version"`
	Attempts []rawAttempt        `json:"attempts"`
	Pods     map[string]rawEntry `json:"pods"`
}

type rawAttempt struct {
	Kind      Kind                       `json:"kind"`
	Resources map[string]rawRequirements `json:"resources"`
	Message   string                     `json:"message"`
	// Pods lists the records of the attempt in the compact format
	// (version 2, EncodeCompact); absent in version 1.
	Pods string `json:"pods"`
	// From is Record.From, bounded as Resources are; absent but for the
	// safety records.
	From map[string]rawRequirements `json:"from"`
	// Until (seconds since the epoch) and Holds are those of the safety
	// records; absent for the others. Since is when a canary's watch
	// began, as earlier versions wrote it beside its watch: it is folded
	// into the watch (foldCanarySince).
	Since int64 `json:"since"`
	Until int64 `json:"until"`
	Holds int   `json:"holds"`
	// Watch is Record.Watch (watch.go); absent but for KindWatch and
	// KindCanary.
	Watch *rawWatch `json:"watch"`
	// Starts is Record.Starts; absent but for KindLimitAtStart.
	Starts map[string]int32 `json:"starts"`
}

type rawRequirements struct {
	Requests map[string]string `json:"requests"`
	Limits   map[string]string `json:"limits"`
}

type rawEntry struct {
	Attempt    int    `json:"attempt"`
	RecordedAt string `json:"recordedAt"`
	Generation int64  `json:"generation"`
}

// DecodeAnnotation reads the records of an annotation value (version 1).
// It returns an error only when the whole value is refused (too large, not
// JSON, unknown version); malformed records are dropped one by one and
// counted. Its work is bounded by the value's length: no quantity is parsed
// before quantity.Check, nor for a record that opts.Keep refuses.
func DecodeAnnotation(value string, opts DecodeOptions) (Decoded, error) {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = MaxAttempts
	}
	d, doc, err := decodeDoc(value, opts, annotationVersion)
	if err != nil {
		return d.out, err
	}
	for key, e := range doc.Pods {
		if !d.room() {
			continue
		}
		at, err := parseTime(e.RecordedAt)
		d.add(key, e.Attempt, at, err, e.Generation)
	}
	return d.out, nil
}

// decodeDoc bounds and parses the JSON of a value of the given version and
// returns the decoder its records are added to.
func decodeDoc(value string, opts DecodeOptions, version int) (*decoder, *rawDoc, error) {
	d := &decoder{opts: opts, out: Decoded{Records: map[types.UID]*Record{}}}
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAnnotationBytes
	}
	if len(value) > maxBytes {
		d.out.drop(DropTooLarge, 1)
		return d, nil, fmt.Errorf("decoding records: %d bytes, more than %d", len(value), maxBytes)
	}
	var doc rawDoc
	if err := json.Unmarshal([]byte(value), &doc); err != nil {
		d.out.drop(DropUnreadable, 1)
		return d, nil, fmt.Errorf("decoding records: %w", err)
	}
	if doc.Version != version {
		d.out.drop(DropUnreadable, 1)
		return d, nil, fmt.Errorf("decoding records: unknown version %d", doc.Version)
	}
	// Records of the attempts past the bound are dropped and counted
	// (DropTooMany); doc keeps them all, so that the compact format's
	// records of those attempts are counted too.
	d.total = len(doc.Attempts)
	d.attempts = doc.Attempts[:min(len(doc.Attempts), opts.MaxAttempts)]
	// Attempts are parsed when a kept record first refers to them.
	d.parsed = make([]*Record, len(d.attempts))
	d.sinces = make([]time.Time, len(d.attempts))
	d.watches = make([]*relWatch, len(d.attempts))
	d.refused = make([]DropReason, len(d.attempts))
	return d, &doc, nil
}

// decoder checks and keeps the records of one value, one by one.
type decoder struct {
	opts DecodeOptions
	// attempts are those within the bound, of total in the value.
	attempts []rawAttempt
	total    int
	parsed   []*Record
	sinces   []time.Time
	watches  []*relWatch
	refused  []DropReason
	kept     int
	out      Decoded
}

// room tells whether another record may be kept; when not, the record
// asked about is counted as dropped.
func (d *decoder) room() bool {
	limit := d.opts.MaxEntries
	if limit <= 0 {
		limit = MaxEntries
	}
	if d.kept >= limit {
		d.out.drop(DropTooMany, 1)
		return false
	}
	return true
}

// add keeps the record of key when it is well formed and kept by
// opts.Keep, and counts it as dropped otherwise.
func (d *decoder) add(key string, attempt int, at time.Time, timeErr error, generation int64) {
	uid := types.UID(key)
	switch {
	case !uidShaped(key):
		d.out.drop(DropBadUID, 1)
		return
	case attempt < 0 || attempt >= d.total:
		d.out.drop(DropBadAttempt, 1)
		return
	case attempt >= len(d.attempts):
		d.out.drop(DropTooMany, 1)
		return
	case timeErr != nil:
		d.out.drop(DropBadTime, 1)
		return
	case !d.opts.Now.IsZero() && at.After(d.opts.Now.Add(FutureSkew)):
		d.out.drop(DropFuture, 1)
		return
	case d.opts.Keep != nil && !d.opts.Keep(uid):
		d.out.drop(DropNotOwned, 1)
		return
	}
	if d.parsed[attempt] == nil && d.refused[attempt] == "" {
		d.parsed[attempt], d.sinces[attempt], d.watches[attempt], d.refused[attempt] = parseAttempt(d.attempts[attempt])
	}
	a := d.parsed[attempt]
	if a == nil {
		d.out.drop(d.refused[attempt], 1)
		return
	}
	d.kept++
	r := &Record{Kind: a.Kind, Attempted: a.Attempted, Message: a.Message, RecordedAt: at, Generation: max(generation, 0), From: a.From,
		Until: a.Until, Holds: a.Holds, Starts: a.Starts}
	if w := d.watches[attempt]; w != nil {
		r.Watch = w.at(at)
	}
	// A canary's record in an earlier version's shape (its watch's start
	// beside its watch, or no watch) is kept in this one's, and its value
	// written again.
	legacy := r.Kind == KindCanary && (r.Watch == nil || !d.sinces[attempt].IsZero())
	if legacy {
		r.Watch = foldCanarySince(r.Watch, r.From, r.Attempted, d.sinces[attempt])
	}
	if r.Watch != nil && !d.opts.Now.IsZero() && r.Watch.latest().After(d.opts.Now.Add(FutureSkew)) {
		d.kept--
		d.out.drop(DropFuture, 1)
		return
	}
	if legacy {
		d.out.Legacy++
	}
	d.out.Records[uid] = r
}

// parseAttempt checks an attempt and parses its quantities, and its watch;
// the reason is set when it is refused. Records sharing an attempt share
// its resources: they are never modified.
func parseAttempt(a rawAttempt) (*Record, time.Time, *relWatch, DropReason) {
	if !knownKind(a.Kind) {
		return nil, time.Time{}, nil, DropUnknownKind
	}
	attempted, ok := parseResources(a.Resources)
	if !ok || len(attempted) == 0 {
		return nil, time.Time{}, nil, DropBadResources
	}
	var from resources.Resources
	if len(a.From) > 0 {
		if from, ok = parseResources(a.From); !ok {
			return nil, time.Time{}, nil, DropBadResources
		}
	}
	since, ok := unixTime(a.Since)
	if !ok {
		return nil, time.Time{}, nil, DropBadTime
	}
	until, ok := unixTime(a.Until)
	if !ok {
		return nil, time.Time{}, nil, DropBadTime
	}
	w, reason := parseWatch(a.Kind, a.Watch, attempted, from)
	if reason != "" {
		return nil, time.Time{}, nil, reason
	}
	if !validStarts(a.Kind, a.Starts, attempted) {
		return nil, time.Time{}, nil, DropBadStarts
	}
	msg := strings.ToValidUTF8(truncate(a.Message, maxMessageBytes), "?")
	// A count past the bound is the bound: the hold's length stops growing
	// long before.
	holds := min(max(a.Holds, 0), MaxHolds)
	if a.Kind != KindCanary {
		since = time.Time{}
	}
	return &Record{Kind: a.Kind, Attempted: attempted, Message: msg, From: from, Until: until, Holds: holds, Starts: a.Starts}, since, w, ""
}

// maxUnixSeconds bounds the times of an attempt: the year 5138, far past
// any time the updater writes, far below what time.Unix overflows at.
const maxUnixSeconds = 1 << 37

// unixTime reads seconds since the epoch; 0 is no time.
func unixTime(secs int64) (time.Time, bool) {
	switch {
	case secs == 0:
		return time.Time{}, true
	case secs < 0 || secs > maxUnixSeconds:
		return time.Time{}, false
	}
	return time.Unix(secs, 0).UTC(), true
}

// parseTime reads a record's time; "" (or null) is no time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if len(s) > len(time.RFC3339Nano) {
		return time.Time{}, fmt.Errorf("time %q too long", s)
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

func knownKind(k Kind) bool {
	switch k {
	case KindInfeasible, KindNodeCapacity, KindInvalid, KindJobRejected, KindJobUnsupported,
		KindMemoryLimitRefused, KindMemoryLimitUnsafe, KindCanary, KindRevert, KindHarmHold, KindWatch, KindLimitAtStart:
		return true
	}
	return false
}

// uidShaped tells whether s may be a UID: the API server generates RFC 4122
// UUIDs, 36 characters of hexadecimal digits and hyphens. Shorter keys of
// letters, digits and hyphens are accepted too (test clusters and fakes name
// their objects' UIDs so); anything else is not a UID. Whether the UID is
// one of the live pods or Jobs of the VPA's namespace is VPAStoreConfig.Live's
// question, and whether it is the VPA's is Store.GetFor's.
func uidShaped(s string) bool {
	if len(s) == 0 || len(s) > MaxUIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}
