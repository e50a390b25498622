package main

// The kubeconfig written for clients: the admin client certificate and the CA, inline.

import (
	"encoding/base64"
	"fmt"
	"os"
)

func writeKubeconfig(path string, port int, pki *pkiFiles) error {
	b64 := base64.StdEncoding.EncodeToString
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kaas-test
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority-data: %s
users:
- name: kaas-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: kaas-test
  context:
    cluster: kaas-test
    user: kaas-admin
    namespace: default
current-context: kaas-test
`, port, b64(pki.caPEM), b64(pki.adminCertPEM), b64(pki.adminKeyPEM))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
