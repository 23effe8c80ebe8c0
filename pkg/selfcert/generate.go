// Package selfcert keeps the admission controller's own webhook serving
// certificate: a CA and a serving key pair in one Secret of its namespace,
// created when missing and rotated before expiry, the CA published in the
// caBundle of the webhook configurations it is told by name, and the pair
// served through tls.Config.GetCertificate.
//
// It never creates a webhook configuration: they ship with the deployment
// manifests, and only their clientConfig.caBundle is patched here.
//
// The Secret is the only shared state between replicas. Every write is
// conditional (create fails if the Secret exists, update carries the
// resourceVersion read), so replicas that act at once end with one CA and
// the same pair, whichever wins.
//
// A rotation has two steps, so that no API server call fails on the way:
//
//  1. stage: a new CA and pair are written as "next", and the new CA joins the
//     bundle (old + new); every replica patches the bundle into caBundle;
//  2. promote: once every named configuration carries that bundle and
//     PublishDelay has passed, the next pair becomes the served one.
//
// The old CA stays in the bundle until it expires, so a replica that has not
// switched yet is still trusted.
package selfcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// backdate is how far before their creation certificates start to be
// valid, for API servers whose clock is behind ours.
const backdate = 5 * time.Minute

// generation is a new CA and a serving pair it signed, PEM-encoded. The
// CA's key is not kept: it signs this one pair only, and a rotation makes a
// new CA.
type generation struct {
	caPEM, certPEM, keyPEM []byte
}

// generate makes a CA and a serving certificate for hosts (DNS names or IP
// addresses), both ECDSA P-256, valid from now-backdate to now+validity.
func generate(now time.Time, hosts []string, validity time.Duration) (*generation, error) {
	if len(hosts) == 0 {
		return nil, errors.New("no host names for the serving certificate")
	}
	if validity <= 0 {
		return nil, errors.New("validity must be positive")
	}
	notBefore, notAfter := now.Add(-backdate).UTC(), now.Add(validity).UTC()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	caSerial, err := serial()
	if err != nil {
		return nil, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("vpa-inplace-webhook-ca@%d", now.Unix())},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the serving key: %w", err)
	}
	leafSerial, err := serial()
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: leafSerial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the serving certificate: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the serving key: %w", err)
	}
	return &generation{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		keyPEM:  keyPEM,
	}, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
