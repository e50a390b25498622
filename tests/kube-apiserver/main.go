// Command kube-apiserver is a real Kubernetes API server (v1.37.2) with an embedded etcd,
// for kaas's integration tests: no controllers, scheduler or kubelet, only the API.
//
//	kube-apiserver --dir DIR [--port N] [--cleanup]
//
// makes certificates and a service-account key in DIR, starts etcd and the API server on
// 127.0.0.1 (port N, or a free one), writes DIR/kubeconfig (admin client certificate,
// group system:masters), and prints one line "READY <port> <kubeconfig>" on stdout once
// /readyz answers. It stops on SIGTERM or SIGINT, and also when its stdin reaches end of
// file: a test harness passes a pipe and keeps the write end, so the server cannot outlive
// the harness even after kill -9. With --cleanup it removes DIR when it stops.
//
//	kube-apiserver kubectl ARGS...
//
// runs kubectl v1.37.2 from the same binary.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "kubectl" {
		runKubectl(os.Args[2:])
	}
	os.Exit(serve())
}

func serve() int {
	dir := flag.String("dir", "", "directory for certificates, etcd data and the kubeconfig (required)")
	port := flag.Int("port", 0, "secure port of the API server (0: a free port)")
	cleanup := flag.Bool("cleanup", false, "remove --dir when the server stops")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "kube-apiserver: --dir is required")
		return 2
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver:", err)
		return 1
	}
	if *cleanup {
		defer os.RemoveAll(*dir)
	}
	code, err := run(*dir, *port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver:", err)
	}
	return code
}

func run(dir string, port int) (int, error) {
	ports, err := freePorts(3)
	if err != nil {
		return 1, err
	}
	if port == 0 {
		port = ports[2]
	}
	pki, err := writePKI(dir)
	if err != nil {
		return 1, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	// Static tokens are unused by the tests (they use the client certificate and
	// TokenRequest), but the flag keeps the token authenticator chain as in the recipe.
	if err := os.WriteFile(tokens, []byte("unused-static-token,kaas-static,kaas-static\n"), 0o600); err != nil {
		return 1, err
	}
	etcd, etcdURL, err := startEtcd(dir, ports[0], ports[1])
	if err != nil {
		return 1, fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	// The command installs its own SIGTERM/SIGINT handler when it is created, so it must
	// be created before anything else listens for signals.
	command := app.NewAPIServerCommand()
	command.SetArgs([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + pki.serverCert,
		"--tls-private-key-file=" + pki.serverKey,
		"--client-ca-file=" + pki.caCert,
		"--token-auth-file=" + tokens,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		// The default reconciler refuses to publish 127.0.0.1 as the kubernetes endpoint.
		"--endpoint-reconciler-type=none",
	})
	stopOnSignalOrStdinEOF()

	done := make(chan int, 1)
	go func() { done <- cli.Run(command) }()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	ready := make(chan error, 1)
	go func() { ready <- waitReady(port, pki) }()
	select {
	case code := <-done:
		return code, fmt.Errorf("API server exited with code %d before it was ready", code)
	case err := <-ready:
		if err != nil {
			return 1, err
		}
	}
	if err := writeKubeconfig(kubeconfig, port, pki); err != nil {
		return 1, err
	}
	fmt.Printf("READY %d %s\n", port, kubeconfig)
	return <-done, nil
}

// stopOnSignalOrStdinEOF turns end of stdin into the SIGTERM the API server handles, and
// bounds the graceful stop: a stop that takes over 20 s ends the process anyway.
func stopOnSignalOrStdinEOF() {
	stopping := make(chan os.Signal, 2)
	signal.Notify(stopping, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	go func() {
		<-stopping
		time.Sleep(20 * time.Second)
		fmt.Fprintln(os.Stderr, "kube-apiserver: graceful stop took over 20 s, exiting")
		os.Exit(1)
	}()
}

// waitReady polls /readyz as the admin until it answers 200 (about 3 s on a warm machine).
func waitReady(port int, pki *pkiFiles) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.caPEM)
	cert, err := tls.X509KeyPair(pki.adminCertPEM, pki.adminKeyPEM)
	if err != nil {
		return err
	}
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{cert}}},
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("/readyz not ready after 120 s: %s", last)
}

// freePorts asks the kernel for n distinct free loopback ports (all held open together).
func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
