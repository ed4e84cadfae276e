package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// recordFileName is where, in its data dir, `up` records the cluster it
// runs: where each listener is. `minictl kubeconfig` and `minictl etcd
// get` read it, so they reach the cluster that runs, wherever its ports
// ended up.
const recordFileName = "cluster.json"

// clusterRecord is the running cluster, as recorded by `up`.
type clusterRecord struct {
	PID int `json:"pid"`
	// API is the plain loopback listener's URL; empty when it is off.
	API string `json:"api,omitempty"`
	// SecureAPI is the secure port's URL; Kubeconfig the admin's
	// kubeconfig for it.
	SecureAPI  string `json:"secureAPI,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Etcd are the embedded etcd's client URLs, EtcdPeer its peer URLs.
	Etcd     []string `json:"etcd,omitempty"`
	EtcdPeer []string `json:"etcdPeer,omitempty"`
	// ControllerManager and CloudControllerManager are where they serve
	// /healthz and /metrics; Cloud is the simulated cloud's API.
	ControllerManager      string `json:"controllerManager,omitempty"`
	CloudControllerManager string `json:"cloudControllerManager,omitempty"`
	Cloud                  string `json:"cloud,omitempty"`
}

// writeRecord records r in dataDir, replacing the file in one step so that
// a reader never sees half of it.
func writeRecord(dataDir string, r clusterRecord) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dataDir, recordFileName), append(b, '\n'), 0o600)
}

// readRecord is the record of the cluster `up` runs (or last ran) on
// dataDir.
func readRecord(dataDir string) (*clusterRecord, error) {
	path := filepath.Join(dataDir, recordFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no cluster has run on data dir %s: start one with minictl up --data-dir %s", dataDir, dataDir)
	}
	if err != nil {
		return nil, err
	}
	var r clusterRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// writeFileAtomic writes data to path through a temporary file beside it,
// synced and renamed over path: path is either what it was or data, never
// half written.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
