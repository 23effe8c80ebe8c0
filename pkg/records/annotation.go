package records

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// AnnotationKey is the VPA annotation holding the infeasible and invalid
// records of the VPA's pods.
const AnnotationKey = "vpa-inplace.dev/infeasible-attempts"

// MemoryAnnotationKey is the VPA annotation holding the memory records of
// the VPA's pods (KindMemoryLimitRefused, KindMemoryLimitUnsafe), in the same
// format.
const MemoryAnnotationKey = "vpa-inplace.dev/memory-limit-holds"

// DefaultMaxAnnotationBytes bounds the annotation: a quarter of the 256 KiB
// the API server allows for all annotations of an object together. With
// identical attempts shared, it holds the records of about 600 pods.
const DefaultMaxAnnotationBytes = 64 << 10

// maxMessageBytes bounds the kubelet's or the API server's message kept with
// a record.
const maxMessageBytes = 512

const annotationVersion = 1

// annotationDoc is the annotation's JSON. Pods of one workload usually fail
// with the same values and the same message, so attempts are listed once and
// pods point at them:
//
//	{"version":1,
//	 "attempts":[{"kind":"NodeCapacity","resources":{"app":{"requests":{"cpu":"8"}}},"message":"..."}],
//	 "pods":{"<pod uid>":{"attempt":0,"recordedAt":"2026-01-02T03:04:05Z"}}}
//
// Records of suspended Jobs (KindJobRejected, KindJobUnsupported) are kept
// under "pods" too, by Job UID, with the Job's generation:
//
//	"<job uid>":{"attempt":1,"recordedAt":"...","generation":3}
//
// A reader that does not know "generation" ignores it.
type annotationDoc struct {
	Version  int                           `json:"version"`
	Attempts []annotationAttempt           `json:"attempts"`
	Pods     map[types.UID]annotationEntry `json:"pods"`
}

type annotationAttempt struct {
	Kind      Kind                `json:"kind"`
	Resources resources.Resources `json:"resources"`
	Message   string              `json:"message,omitempty"`
	// From is Record.From (the safety records); a reader that does not
	// know it ignores it.
	From resources.Resources `json:"from,omitempty"`
	// Until is Record.Until in seconds since the epoch, and Holds
	// Record.Holds (the safety records); absent when zero. A reader that
	// does not know them ignores them. (Earlier versions wrote a canary's
	// watch start as "since": decode.go reads it.)
	Until int64 `json:"until,omitempty"`
	Holds int   `json:"holds,omitempty"`
	// Watch is Record.Watch (watch.go), its times relative to each
	// record's own.
	Watch *attemptWatch `json:"watch,omitempty"`
	// Starts is Record.Starts (KindLimitAtStart); a reader that does not
	// know it ignores it.
	Starts map[string]int32 `json:"starts,omitempty"`
}

// unixOrZero is t in seconds since the epoch, 0 for the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

type annotationEntry struct {
	Attempt    int         `json:"attempt"`
	RecordedAt metav1.Time `json:"recordedAt"`
	Generation int64       `json:"generation,omitempty"`
}

// EncodeAnnotation returns the annotation value holding records, "" when
// there are none. When the value would exceed maxBytes, MaxEntries records
// or MaxAttempts attempts, the oldest records are left out (they are still
// held in memory) and their UIDs returned: DecodeAnnotation reads back every
// record written. The same records always give the same value.
func EncodeAnnotation(records map[types.UID]*Record, maxBytes int) (string, []types.UID, error) {
	return encodeNewestFirst(records, bounds{bytes: maxBytes, records: MaxEntries, attempts: MaxAttempts}, buildAnnotation)
}

// bounds are what one value holds at most; the decoder of the format
// reads as much.
type bounds struct {
	bytes, records, attempts int
}

// encodeNewestFirst builds the value of records within b: newest first, it
// takes records up to b.records, skipping those the decoder would refuse
// (encodable) and those whose attempt would be one more than b.attempts,
// then leaves the oldest of those out while the value is longer than
// b.bytes. It returns the UIDs of the records left out.
func encodeNewestFirst(records map[types.UID]*Record, b bounds,
	build func(map[types.UID]*Record, []types.UID) (string, error)) (string, []types.UID, error) {
	if len(records) == 0 {
		return "", nil, nil
	}
	// Newest first: those are kept when space runs out.
	uids := make([]types.UID, 0, len(records))
	for uid := range records {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool {
		a, b := records[uids[i]].RecordedAt, records[uids[j]].RecordedAt
		if !a.Equal(b) {
			return a.After(b)
		}
		return uids[i] < uids[j]
	})
	kept := make([]types.UID, 0, min(len(uids), b.records))
	attempts := map[string]bool{}
	for _, uid := range uids {
		if len(kept) == b.records {
			break
		}
		if !encodable(records[uid]) {
			continue
		}
		k := attemptKey(records[uid])
		if !attempts[k] {
			if len(attempts) == b.attempts {
				continue
			}
			attempts[k] = true
		}
		kept = append(kept, uid)
	}
	for {
		value, err := build(records, kept)
		if err != nil {
			return "", nil, err
		}
		if len(value) <= b.bytes {
			return value, leftOut(uids, kept), nil
		}
		if len(kept) <= 1 {
			return "", uids, nil
		}
		// Drop in proportion to the excess, at least one record.
		keep := min(len(kept)-1, len(kept)*b.bytes/len(value))
		kept = kept[:keep]
	}
}

// leftOut returns the UIDs of all that are not in kept, in their order.
func leftOut(all, kept []types.UID) []types.UID {
	if len(kept) == len(all) {
		return nil
	}
	in := make(map[types.UID]bool, len(kept))
	for _, uid := range kept {
		in[uid] = true
	}
	out := make([]types.UID, 0, len(all)-len(kept))
	for _, uid := range all {
		if !in[uid] {
			out = append(out, uid)
		}
	}
	return out
}

func buildAnnotation(records map[types.UID]*Record, uids []types.UID) (string, error) {
	attempts, indexOf := sharedAttempts(records, uids)
	doc := annotationDoc{Version: annotationVersion, Attempts: attempts, Pods: map[types.UID]annotationEntry{}}
	for _, uid := range uids {
		at := records[uid].RecordedAt
		if !at.IsZero() {
			at = at.UTC().Truncate(time.Second)
		}
		doc.Pods[uid] = annotationEntry{Attempt: indexOf[uid], RecordedAt: metav1.NewTime(at), Generation: records[uid].Generation}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding records: %w", err)
	}
	return string(b), nil
}

// sharedAttempts groups the records of uids by what they say (attemptKey):
// one attempt for each group, in a stable order, and each UID's index in
// it.
func sharedAttempts(records map[types.UID]*Record, uids []types.UID) ([]annotationAttempt, map[types.UID]int) {
	firstOf := map[string]*Record{}
	keyOf := make(map[types.UID]string, len(uids))
	for _, uid := range uids {
		r := records[uid]
		k := attemptKey(r)
		keyOf[uid] = k
		if _, ok := firstOf[k]; !ok {
			firstOf[k] = r
		}
	}
	keys := make([]string, 0, len(firstOf))
	for k := range firstOf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attempts := make([]annotationAttempt, len(keys))
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		r := firstOf[k]
		attempts[i] = annotationAttempt{Kind: r.Kind, Resources: r.Attempted, Message: truncate(r.Message, maxMessageBytes), From: r.From,
			Until: unixOrZero(r.Until), Holds: min(max(r.Holds, 0), MaxHolds), Watch: relative(r), Starts: r.Starts}
		index[k] = i
	}
	indexOf := make(map[types.UID]int, len(uids))
	for uid, k := range keyOf {
		indexOf[uid] = index[k]
	}
	return attempts, indexOf
}

// attemptKey identifies what a record says, apart from its pod and time.
func attemptKey(r *Record) string {
	return string(r.Kind) + "\x00" + r.Attempted.String() + "\x00" + truncate(r.Message, maxMessageBytes) + "\x00" + r.From.String() +
		"\x00" + strconv.FormatInt(unixOrZero(r.Until), 10) +
		"\x00" + strconv.Itoa(min(max(r.Holds, 0), MaxHolds)) + "\x00" + watchKey(r) + "\x00" + startsKey(r.Starts)
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
