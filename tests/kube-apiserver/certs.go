package main

// Certificates made in-process at every start: a CA, the serving certificate for
// 127.0.0.1, the admin client certificate (group system:masters, so RBAC lets it do
// everything) and the service-account signing key. Nothing is reused between runs.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// pkiFiles are the paths the API server's flags and the kubeconfig refer to.
type pkiFiles struct {
	caCert, serverCert, serverKey, saKey, saPub string
	caPEM, adminCertPEM, adminKeyPEM            []byte
}

func newKeyPair(template *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(7 * 24 * time.Hour)
	signerCert, signerKey := template, key
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, signerCert, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func writePKI(dir string) (*pkiFiles, error) {
	ca, err := newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "kaas-test-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	server, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	admin, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kaas-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files := &pkiFiles{
		caCert:       filepath.Join(dir, "ca.crt"),
		serverCert:   filepath.Join(dir, "apiserver.crt"),
		serverKey:    filepath.Join(dir, "apiserver.key"),
		saKey:        filepath.Join(dir, "sa.key"),
		saPub:        filepath.Join(dir, "sa.pub"),
		caPEM:        ca.certPEM,
		adminCertPEM: admin.certPEM,
		adminKeyPEM:  admin.keyPEM,
	}
	writes := map[string][]byte{
		files.caCert:     ca.certPEM,
		files.serverCert: server.certPEM,
		files.serverKey:  server.keyPEM,
		files.saKey: pem.EncodeToMemory(&pem.Block{
			Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		files.saPub: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	}
	for path, data := range writes {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return files, nil
}
