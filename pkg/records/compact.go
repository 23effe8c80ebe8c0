package records

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The compact format (version 2) is what ConfigMapStore writes: the records
// of up to MaxCompactEntries pods of one VPA in one ConfigMap. Attempts are
// listed once, as in the annotation (version 1), and each lists its pods in
// one string, "<uid>:<unix seconds>[:<generation>]" separated by spaces:
//
//	{"version":2,"attempts":[{"kind":"NodeCapacity","resources":{"app":{"requests":{"cpu":"8"}}},
//	  "message":"...","pods":"<uid>:1767323045 <uid>:1767323050"}]}
//
// About 48 bytes a pod: 10,000 pods take 480 KB, under the 1 MiB the API
// server allows a ConfigMap.
const compactVersion = 2

const (
	// MaxCompactEntries bounds the records of one compact value.
	MaxCompactEntries = 20000
	// MaxCompactAttempts bounds the attempts of one compact value: every
	// record may have an attempt of its own (memory records carry each
	// pod's usage in their message). The size bounds them first: an
	// attempt takes 70 bytes at least.
	MaxCompactAttempts = MaxCompactEntries
	// DefaultMaxCompactBytes bounds a compact value: the API server allows a
	// ConfigMap 1 MiB in all; the rest is left to its metadata.
	DefaultMaxCompactBytes = 1000 << 10
	// maxCompactField bounds the digits of a time or a generation: more
	// are no number this format writes.
	maxCompactField = 19
)

// EncodeCompact returns the compact value holding records, "" when there are
// none. When the value would exceed maxBytes, MaxCompactEntries records or
// MaxCompactAttempts attempts, the oldest records are left out and their
// UIDs returned: DecodeCompact reads back every record written. The same
// records always give the same value.
func EncodeCompact(records map[types.UID]*Record, maxBytes int) (string, []types.UID, error) {
	return encodeNewestFirst(records, bounds{bytes: maxBytes, records: MaxCompactEntries, attempts: MaxCompactAttempts}, buildCompact)
}

func buildCompact(records map[types.UID]*Record, uids []types.UID) (string, error) {
	attempts, indexOf := sharedAttempts(records, uids)
	pods := make([]strings.Builder, len(attempts))
	for _, uid := range uids {
		r := records[uid]
		b := &pods[indexOf[uid]]
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(uid))
		b.WriteByte(':')
		var at int64
		if !r.RecordedAt.IsZero() {
			at = r.RecordedAt.Unix()
		}
		b.WriteString(strconv.FormatInt(at, 10))
		if r.Generation > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.FormatInt(r.Generation, 10))
		}
	}
	doc := compactDoc{Version: compactVersion, Attempts: make([]compactAttempt, len(attempts))}
	for i, a := range attempts {
		doc.Attempts[i] = compactAttempt{annotationAttempt: a, Pods: pods[i].String()}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding records: %w", err)
	}
	return string(b), nil
}

type compactDoc struct {
	Version  int              `json:"version"`
	Attempts []compactAttempt `json:"attempts"`
}

type compactAttempt struct {
	annotationAttempt
	Pods string `json:"pods"`
}

// DecodeCompact reads the records of a compact value (version 2) with the
// same checks as DecodeAnnotation; opts.MaxBytes 0 means
// DefaultMaxCompactBytes, opts.MaxEntries 0 MaxCompactEntries and
// opts.MaxAttempts 0 MaxCompactAttempts.
func DecodeCompact(value string, opts DecodeOptions) (Decoded, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxCompactBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = MaxCompactEntries
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = MaxCompactAttempts
	}
	d, doc, err := decodeDoc(value, opts, compactVersion)
	if err != nil {
		return d.out, err
	}
	// Every attempt, also those past the bound: their records are counted.
	for i, a := range doc.Attempts {
		rest := a.Pods
		for rest != "" {
			var field string
			field, rest, _ = strings.Cut(rest, " ")
			if field == "" || !d.room() {
				continue
			}
			uid, at, generation, err := parseCompactEntry(field)
			d.add(uid, i, at, err, generation)
		}
	}
	return d.out, nil
}

// parseCompactEntry reads "<uid>:<unix seconds>[:<generation>]". A bad UID
// is left for the decoder to count; a bad time or generation is an error.
func parseCompactEntry(field string) (uid string, at time.Time, generation int64, err error) {
	uid, rest, _ := strings.Cut(field, ":")
	secs, gen, hasGen := strings.Cut(rest, ":")
	if len(secs) == 0 || len(secs) > maxCompactField || len(gen) > maxCompactField {
		return uid, time.Time{}, 0, fmt.Errorf("record %q: bad time or generation", field)
	}
	s, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || s < 0 {
		return uid, time.Time{}, 0, fmt.Errorf("record %q: bad time", field)
	}
	if s > 0 {
		at = time.Unix(s, 0).UTC()
	}
	if hasGen {
		generation, err = strconv.ParseInt(gen, 10, 64)
		if err != nil {
			return uid, time.Time{}, 0, fmt.Errorf("record %q: bad generation", field)
		}
	}
	return uid, at, generation, nil
}
