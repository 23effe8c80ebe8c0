package selfcert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the Secret.
const (
	// KeyCABundle holds the CAs to trust, PEM, concatenated: what the webhook
	// configurations' caBundle must hold.
	KeyCABundle = "ca.crt"
	// KeyCert and KeyKey hold the served pair (the kubernetes.io/tls keys).
	KeyCert = corev1.TLSCertKey
	KeyKey  = corev1.TLSPrivateKeyKey
	// KeyNextCert and KeyNextKey hold the pair staged by a rotation, served
	// once its CA is published.
	KeyNextCert = "next.crt"
	KeyNextKey  = "next.key"

	// AnnotationStagedAt is when the next pair was staged (RFC 3339).
	AnnotationStagedAt = "vpa-inplace.dev/staged-at"
	// LabelManagedBy marks the Secrets this package writes, unless the
	// Secret already carries it (a chart's Secret: Helm); an unusable
	// Secret with neither it nor AnnotationWrittenBy, and with data, is
	// never overwritten.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// AnnotationWrittenBy, ManagedBy, marks every Secret this package
	// wrote, whoever manages it.
	AnnotationWrittenBy = "vpa-inplace.dev/written-by"
	// ManagedBy is the value of LabelManagedBy and AnnotationWrittenBy.
	ManagedBy = "vpa-inplace-admission-controller"
)

// Bounds on what is read from the Secret before parsing it: it is written
// by this package, but anyone allowed to edit it may write anything.
const (
	maxPEMBytes = 64 << 10
	maxCAs      = 8
)

// pair is a parsed serving key pair.
type pair struct {
	certPEM, keyPEM []byte
	tls             *tls.Certificate
}

func (p *pair) leaf() *x509.Certificate { return p.tls.Leaf }

// caCert is one CA of the bundle.
type caCert struct {
	pem  []byte
	cert *x509.Certificate
}

// State is the parsed content of the Secret.
type State struct {
	cas      []caCert
	current  pair
	next     *pair
	stagedAt time.Time
}

// Bundle returns the PEM of every CA to trust, in order.
func (s *State) Bundle() []byte {
	var b bytes.Buffer
	for _, ca := range s.cas {
		b.Write(ca.pem)
	}
	return b.Bytes()
}

// Certificate returns the served pair.
func (s *State) Certificate() *tls.Certificate { return s.current.tls }

// NotAfter returns when the served certificate expires.
func (s *State) NotAfter() time.Time { return s.current.leaf().NotAfter }

// Staged tells whether a rotation is under way (a next pair waits).
func (s *State) Staged() bool { return s.next != nil }

// parseState reads a Secret's data and annotations. Any missing, oversized
// or inconsistent part makes the whole Secret unusable.
func parseState(data map[string][]byte, annotations map[string]string) (*State, error) {
	for k, v := range data {
		if len(v) > maxPEMBytes {
			return nil, fmt.Errorf("key %s holds %d bytes, more than %d", k, len(v), maxPEMBytes)
		}
	}
	st := &State{}
	rest := data[KeyCABundle]
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if len(st.cas) == maxCAs {
			return nil, fmt.Errorf("key %s holds more than %d certificates", KeyCABundle, maxCAs)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", KeyCABundle, err)
		}
		if !cert.IsCA {
			return nil, fmt.Errorf("key %s holds a certificate that is not a CA", KeyCABundle)
		}
		st.cas = append(st.cas, caCert{pem: pem.EncodeToMemory(block), cert: cert})
	}
	if len(st.cas) == 0 {
		return nil, fmt.Errorf("key %s holds no CA certificate", KeyCABundle)
	}
	current, err := st.parsePair(data[KeyCert], data[KeyKey])
	if err != nil {
		return nil, fmt.Errorf("keys %s and %s: %w", KeyCert, KeyKey, err)
	}
	st.current = *current
	if data[KeyNextCert] != nil || data[KeyNextKey] != nil {
		if st.next, err = st.parsePair(data[KeyNextCert], data[KeyNextKey]); err != nil {
			return nil, fmt.Errorf("keys %s and %s: %w", KeyNextCert, KeyNextKey, err)
		}
		const maxTime = len(time.RFC3339Nano)
		raw := annotations[AnnotationStagedAt]
		if len(raw) > maxTime {
			return nil, fmt.Errorf("annotation %s is longer than %d bytes", AnnotationStagedAt, maxTime)
		}
		if st.stagedAt, err = time.Parse(time.RFC3339, raw); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", AnnotationStagedAt, err)
		}
	}
	return st, nil
}

// parsePair loads a pair and checks that a CA of the bundle signed it.
func (s *State) parsePair(certPEM, keyPEM []byte) (*pair, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errors.New("missing")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	for _, ca := range s.cas {
		roots.AddCert(ca.cert)
	}
	leaf := cert.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: leaf.NotBefore,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, fmt.Errorf("not signed by a CA of %s: %w", KeyCABundle, err)
	}
	return &pair{certPEM: certPEM, keyPEM: keyPEM, tls: &cert}, nil
}

// data returns the Secret data of the state.
func (s *State) data() map[string][]byte {
	d := map[string][]byte{
		KeyCABundle: s.Bundle(),
		KeyCert:     s.current.certPEM,
		KeyKey:      s.current.keyPEM,
	}
	if s.next != nil {
		d[KeyNextCert] = s.next.certPEM
		d[KeyNextKey] = s.next.keyPEM
	}
	return d
}

// apply writes the state into secret (data, the staged-at annotation and
// the managed-by label), keeping its other metadata.
//
// The type and a managed-by label the Secret has are kept: the manifests
// ship it empty, so of type Opaque (a kubernetes.io/tls Secret must hold a
// pair), which cannot be changed, and labelled by whoever applies them
// (Helm refuses an upgrade over a Secret whose label says otherwise). A
// Secret created here is a kubernetes.io/tls Secret.
func (s *State) apply(secret *corev1.Secret) {
	if secret.Type == "" {
		secret.Type = corev1.SecretTypeTLS
	}
	secret.Data = s.data()
	secret.StringData = nil
	secret.Annotations = maps.Clone(secret.Annotations)
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	if s.next != nil {
		secret.Annotations[AnnotationStagedAt] = s.stagedAt.UTC().Format(time.RFC3339)
	} else {
		delete(secret.Annotations, AnnotationStagedAt)
	}
	secret.Annotations[AnnotationWrittenBy] = ManagedBy
	secret.Labels = maps.Clone(secret.Labels)
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	if secret.Labels[LabelManagedBy] == "" {
		secret.Labels[LabelManagedBy] = ManagedBy
	}
}

// ours tells whether secret may be overwritten when it is not usable: this
// package wrote it, or it holds nothing (the manifests ship it empty).
func ours(secret *corev1.Secret) bool {
	return secret.Labels[LabelManagedBy] == ManagedBy || secret.Annotations[AnnotationWrittenBy] == ManagedBy ||
		(len(secret.Data) == 0 && len(secret.StringData) == 0)
}

// stateOf builds the state of a fresh generation.
func stateOf(g *generation) (*State, error) {
	return parseState(map[string][]byte{KeyCABundle: g.caPEM, KeyCert: g.certPEM, KeyKey: g.keyPEM}, nil)
}

// withNext returns s with g staged at now: g's CA joins the bundle and its
// pair waits as next.
func (s *State) withNext(g *generation, now time.Time) (*State, error) {
	d := s.data()
	d[KeyCABundle] = append(s.Bundle(), g.caPEM...)
	d[KeyNextCert], d[KeyNextKey] = g.certPEM, g.keyPEM
	return parseState(d, map[string]string{AnnotationStagedAt: now.UTC().Format(time.RFC3339)})
}

// restaged returns s with g staged at now in place of the next pair: the
// next pair's CA leaves the bundle (it signed nothing ever served), g's
// joins it.
func (s *State) restaged(g *generation, now time.Time) (*State, error) {
	out := &State{current: s.current}
	for _, ca := range s.cas {
		if s.next != nil && s.signed(ca, s.next) && !s.signed(ca, &s.current) {
			continue
		}
		out.cas = append(out.cas, ca)
	}
	return out.withNext(g, now)
}

// promoted returns s with the next pair served. The bundle is unchanged:
// the old CA stays until it expires.
func (s *State) promoted() *State {
	return &State{cas: s.cas, current: *s.next}
}

// expiredCAs returns the CAs that expired before now and signed neither pair:
// nothing served needs them any more.
func (s *State) expiredCAs(now time.Time) []caCert {
	var out []caCert
	for _, ca := range s.cas {
		if !ca.cert.NotAfter.Before(now) || s.signed(ca, &s.current) || (s.next != nil && s.signed(ca, s.next)) {
			continue
		}
		out = append(out, ca)
	}
	return out
}

// retiredAt returns when the next CA will be trimmed: the earliest expiry of
// a CA that signed neither pair (zero if none).
func (s *State) retiredAt() time.Time {
	var t time.Time
	for _, ca := range s.cas {
		if s.signed(ca, &s.current) || (s.next != nil && s.signed(ca, s.next)) {
			continue
		}
		if t.IsZero() || ca.cert.NotAfter.Before(t) {
			t = ca.cert.NotAfter
		}
	}
	return t
}

// trimmed returns s without the CAs of expiredCAs.
func (s *State) trimmed(now time.Time) *State {
	drop := s.expiredCAs(now)
	out := &State{current: s.current, next: s.next, stagedAt: s.stagedAt}
	for _, ca := range s.cas {
		dropped := false
		for _, d := range drop {
			if d.cert == ca.cert {
				dropped = true
				break
			}
		}
		if !dropped {
			out.cas = append(out.cas, ca)
		}
	}
	return out
}

func (s *State) signed(ca caCert, p *pair) bool {
	return p.leaf().CheckSignatureFrom(ca.cert) == nil
}
