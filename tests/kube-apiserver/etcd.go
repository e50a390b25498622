package main

// The embedded etcd: one member, client and peer URLs on 127.0.0.1, data under the
// server's directory, so the API server is one process with nothing else to install.

import (
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func startEtcd(dir string, clientPort, peerPort int) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Name = "kaas-test"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.LogLevel = "error"
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Test data is thrown away with the directory: no need to pay for fsyncs.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd not ready after 60 s")
	}
	return e, clientURL.String(), nil
}
