package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/minictl/minictl/api"
)

// `minictl etcd get` and `minictl etcd watch` read the running cluster's
// etcd, as etcdctl's commands of the same names do, without installing
// etcdctl: the keys under /registry/ are where the API server keeps
// every object, a built-in kind's in protobuf and a custom object as JSON.
// Values in protobuf are printed as their JSON.

// etcdClientFlags are the flags that find the cluster's etcd.
type etcdClientFlags struct {
	dataDir   string
	endpoints string
}

func (f *etcdClientFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "the data dir of the minictl up whose etcd to read")
	fs.StringVar(&f.endpoints, "endpoints", "", "comma-separated etcd client URLs (default: the embedded etcd of the cluster running on --data-dir)")
}

// dial connects to the etcd the flags name.
func (f *etcdClientFlags) dial() (*clientv3.Client, error) {
	endpoints := splitList(f.endpoints)
	if len(endpoints) == 0 {
		r, err := readRecord(f.dataDir)
		if err != nil {
			return nil, err
		}
		if len(r.Etcd) == 0 {
			return nil, fmt.Errorf("the cluster on data dir %s uses an external etcd: give its --endpoints", f.dataDir)
		}
		endpoints = r.Etcd
	}
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// etcdCallTimeout bounds a get: a cluster that is not running answers
// nothing.
const etcdCallTimeout = 5 * time.Second

// runEtcdGet is `minictl etcd get`.
func runEtcdGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("etcd get")
	var cf etcdClientFlags
	cf.bind(fs)
	prefix := fs.Bool("prefix", false, "get every key that starts with KEY (all keys without KEY)")
	keysOnly := fs.Bool("keys-only", false, "print the keys only")
	rev := fs.Int64("rev", 0, "read as of this revision of etcd's history (0: the newest)")
	limit := fs.Int64("limit", 0, "print at most this many keys (0: no limit)")
	if err := parseFlagsArgs(ctx, fs, args, 1); err != nil {
		return err
	}
	key := fs.Arg(0)
	if key == "" && !*prefix {
		return errors.New("give a KEY, or --prefix to get every key (under KEY when given)")
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	opts := []clientv3.OpOption{clientv3.WithRev(*rev), clientv3.WithLimit(*limit), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if *prefix {
		opts = append(opts, clientv3.WithPrefix())
		if key == "" {
			key, opts = "\x00", append(opts, clientv3.WithFromKey())
		}
	}
	if *keysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	callCtx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
	defer cancel()
	resp, err := c.Get(callCtx, key, opts...)
	if err != nil {
		return fmt.Errorf("etcd at %v: %w (is the cluster running?)", c.Endpoints(), err)
	}
	for _, kv := range resp.Kvs {
		fmt.Fprintln(stdout, string(kv.Key))
		if !*keysOnly {
			fmt.Fprintln(stdout, printableValue(kv.Value))
		}
	}
	return nil
}

// runEtcdWatch is `minictl etcd watch`: each change as etcdctl prints it,
// PUT or DELETE, the key, and a PUT's value.
func runEtcdWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("etcd watch")
	var cf etcdClientFlags
	cf.bind(fs)
	prefix := fs.Bool("prefix", false, "watch every key that starts with KEY (all keys without KEY)")
	rev := fs.Int64("rev", 0, "start from this revision of etcd's history, replaying the changes since (0: from now)")
	if err := parseFlagsArgs(ctx, fs, args, 1); err != nil {
		return err
	}
	key := fs.Arg(0)
	if key == "" && !*prefix {
		return errors.New("give a KEY, or --prefix to watch every key (under KEY when given)")
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	opts := []clientv3.OpOption{clientv3.WithRev(*rev)}
	if *prefix {
		opts = append(opts, clientv3.WithPrefix())
		if key == "" {
			key, opts = "\x00", append(opts, clientv3.WithFromKey())
		}
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range c.Watch(ctx, key, opts...) {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("etcd at %v: %w", c.Endpoints(), err)
		}
		for _, ev := range resp.Events {
			fmt.Fprintln(stdout, ev.Type.String())
			fmt.Fprintln(stdout, string(ev.Kv.Key))
			if ev.Type == clientv3.EventTypePut {
				fmt.Fprintln(stdout, printableValue(ev.Kv.Value))
			}
		}
	}
	return nil
}

// printableValue is a value as a reader can read it: an object stored as
// protobuf (every built-in kind, as kube-apiserver stores them) as its
// JSON, the fields the protobuf holds and nothing else, as auger decodes
// what etcdctl prints as bytes; JSON (custom objects) as it is; anything
// else quoted.
func printableValue(v []byte) string {
	if json.Valid(v) {
		return string(v)
	}
	if s, ok := protobufAsJSON(v); ok {
		return s
	}
	return fmt.Sprintf("%q", v)
}

// protobufAsJSON decodes v, an object in Kubernetes' protobuf envelope of
// a kind minictl knows, and encodes it as JSON.
func protobufAsJSON(v []byte) (string, bool) {
	apiVersion, kind, msg, err := api.ProtobufObject(v)
	if err != nil {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "", false
	}
	res, ok := api.Resources().ForKind(gv.WithKind(kind))
	if !ok {
		return "", false
	}
	obj := res.New()
	if api.UnmarshalProtobuf(msg, obj) != nil {
		return "", false
	}
	obj.GetObjectKind().SetGroupVersionKind(gv.WithKind(kind))
	out, err := json.Marshal(obj)
	if err != nil {
		return "", false
	}
	return string(out), true
}
