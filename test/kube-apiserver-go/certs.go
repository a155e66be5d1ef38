package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is what one server run trusts: fresh keys each start, so nothing secret is committed and
// no two runs share a credential.
type pki struct {
	caFile, servingCertFile, servingKeyFile string
	adminCertFile, adminKeyFile             string
	serviceAccountKeyFile                   string
}

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func generatePKI(dir string) (pki, error) {
	p := pki{
		caFile:                filepath.Join(dir, "ca.crt"),
		servingCertFile:       filepath.Join(dir, "serving.crt"),
		servingKeyFile:        filepath.Join(dir, "serving.key"),
		adminCertFile:         filepath.Join(dir, "admin.crt"),
		adminKeyFile:          filepath.Join(dir, "admin.key"),
		serviceAccountKeyFile: filepath.Join(dir, "service-account.key"),
	}
	ca, err := issue(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "pglease-test-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return p, err
	}
	serving, err := issue(&ca, &x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		// The in-cluster names and the first service IP as a real control plane would carry them,
		// though the tests only ever dial 127.0.0.1.
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return p, err
	}
	// system:masters is bound to cluster-admin by the bootstrap policy: the harness sets up RBAC
	// and plays the kubelet with it, while the code under test gets only the chart's Role.
	admin, err := issue(&ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "pglease-test-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return p, err
	}
	serviceAccountKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	writes := []struct {
		path, kind string
		der        func() ([]byte, error)
	}{
		{p.caFile, "CERTIFICATE", raw(ca.cert.Raw)},
		{p.servingCertFile, "CERTIFICATE", raw(serving.cert.Raw)},
		{p.servingKeyFile, "EC PRIVATE KEY", func() ([]byte, error) { return x509.MarshalECPrivateKey(serving.key) }},
		{p.adminCertFile, "CERTIFICATE", raw(admin.cert.Raw)},
		{p.adminKeyFile, "EC PRIVATE KEY", func() ([]byte, error) { return x509.MarshalECPrivateKey(admin.key) }},
		{p.serviceAccountKeyFile, "EC PRIVATE KEY", func() ([]byte, error) { return x509.MarshalECPrivateKey(serviceAccountKey) }},
	}
	for _, w := range writes {
		der, err := w.der()
		if err != nil {
			return p, fmt.Errorf("encode %s: %w", w.path, err)
		}
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: der}), 0o600); err != nil {
			return p, err
		}
	}
	return p, nil
}

func raw(der []byte) func() ([]byte, error) { return func() ([]byte, error) { return der, nil } }

// issue signs template with parent, or self-signs it when parent is nil.
func issue(parent *keyPair, template *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return keyPair{}, err
	}
	template.SerialNumber = serial
	// Backdated so that a clock a little behind the signer's still accepts the certificate.
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(7 * 24 * time.Hour)
	signerCert, signerKey := template, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, signerCert, key.Public(), signerKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("sign %s: %w", template.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: cert, key: key}, nil
}
