package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func dataFile(dir string) string { return filepath.Join(dir, "cloud.json") }

// load reads what the data dir holds; a missing file is an empty cloud.
func (c *Cloud) load() error {
	b, err := os.ReadFile(c.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cloud: read %s: %w", c.file, err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("cloud: read %s: %w", c.file, err)
	}
	if s.Instances != nil {
		c.state.Instances = s.Instances
	}
	if s.LoadBalancers != nil {
		c.state.LoadBalancers = s.LoadBalancers
	}
	if s.Routes != nil {
		c.state.Routes = s.Routes
	}
	c.state.NextID = max(s.NextID, 1)
	c.log.Info(fmt.Sprintf("%d instances, %d load balancers and %d routes read from %s",
		len(c.state.Instances), len(c.state.LoadBalancers), len(c.state.Routes), c.file))
	return nil
}

// saveLocked writes the state to the data dir, whole, through a temporary
// file renamed over the old one, so that a crash leaves either the old or
// the new state and never half of one. A failed write is logged: the
// cloud goes on in memory, as it does with no data dir.
func (c *Cloud) saveLocked() {
	if c.file == "" {
		return
	}
	err := func() error {
		b, err := json.MarshalIndent(&c.state, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(c.file), 0o700); err != nil {
			return err
		}
		tmp := c.file + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, c.file)
	}()
	if err != nil {
		c.log.Warn("keeping the state failed; going on in memory", "file", c.file, "err", err)
	}
}
