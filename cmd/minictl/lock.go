package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lockFileName is the data dir's lock: held by the minictl that uses the
// data dir, with its PID inside. etcd locks its database too, but by
// waiting for it: a second minictl on the same data dir would hang.
const lockFileName = "minictl.lock"

// errLocked is a data dir another process holds.
var errLocked = errors.New("locked")

// dataDirLock is a data dir, held.
type dataDirLock struct{ f *os.File }

// lockDataDir takes dir's lock, without waiting: a data dir in use is an
// error that names the process using it. The lock is the process's until
// unlock, or until it exits, however it exits.
func lockDataDir(dir string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if !errors.Is(err, errLocked) {
			return nil, fmt.Errorf("data dir %s: lock %s: %w", dir, path, err)
		}
		holder := "another process"
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				holder = fmt.Sprintf("minictl (pid %d)", pid)
			}
		}
		return nil, fmt.Errorf("data dir %s is in use by %s: stop it, or give this one another --data-dir", dir, holder)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// unlock gives the data dir up.
func (l *dataDirLock) unlock() {
	if l != nil {
		l.f.Close() // closing the file releases its lock
	}
}
