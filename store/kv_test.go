package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCreateGet(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)
	const key = "/registry/core/pods/default/web"
	before := mustRevision(t, s)
	rev := mustCreate(t, s, key, `{"v":1}`)
	if rev <= before {
		t.Errorf("Create returned revision %d, want > %d", rev, before)
	}
	if _, err := s.Create(ctx, key, []byte(`{"v":2}`)); !errors.Is(err, ErrExists) {
		t.Errorf("second Create: err = %v, want ErrExists", err)
	}

	tests := []struct {
		key     string
		want    *KeyValue
		wantErr error
	}{
		{key: key, want: &KeyValue{Key: key, Value: []byte(`{"v":1}`), Revision: rev}}, // the second Create changed nothing
		{key: "/registry/core/pods/default/nope", wantErr: ErrNotFound},
		{key: "/registry/core/pods/default/we", wantErr: ErrNotFound}, // a prefix of a key is not a key
		{key: key + "/", wantErr: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := s.Get(ctx, tt.key)
			if !wantErr(err, tt.wantErr) {
				t.Fatalf("Get: err = %v, want %v", err, tt.wantErr)
			}
			if tt.want != nil && (got.Key != tt.want.Key || string(got.Value) != string(tt.want.Value) || got.Revision != tt.want.Revision) {
				t.Errorf("Get = {%s %s %d}, want {%s %s %d}", got.Key, got.Value, got.Revision, tt.want.Key, tt.want.Value, tt.want.Revision)
			}
		})
	}
}

func TestListPrefixIsolation(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	for _, k := range []string{
		"/registry/core/pod",
		"/registry/core/pods/default/a",
		"/registry/core/pods/kube-system/b",
		"/registry/core/podsx/default/c",
		"/registry/core/pods0",
	} {
		mustCreate(t, s, k, "v")
	}

	tests := []struct {
		prefix string
		want   string
	}{
		{prefix: "/registry/core/pods/", want: "/registry/core/pods/default/a /registry/core/pods/kube-system/b"},
		{prefix: "/registry/core/pods/default/", want: "/registry/core/pods/default/a"},
		{prefix: "/registry/core/podsx/", want: "/registry/core/podsx/default/c"},
		{prefix: "/registry/core/nodes/", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			res, err := s.List(testCtx(t), tt.prefix, ListOptions{})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if got := keys(res.Items); got != tt.want {
				t.Errorf("List %s = [%s], want [%s]", tt.prefix, got, tt.want)
			}
			if res.More || res.RemainingItemCount != 0 {
				t.Errorf("List %s: More = %v, RemainingItemCount = %d; want false, 0", tt.prefix, res.More, res.RemainingItemCount)
			}
		})
	}
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)

	tests := []struct {
		name  string
		limit int64
	}{
		{name: "limit 1", limit: 1},
		{name: "limit 3", limit: 3},
		{name: "limit 10", limit: 10},
		{name: "limit 100", limit: 100},
		{name: "no limit", limit: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/registry/%d/pods/", tt.limit)
			var want []string
			for i := range 10 {
				k := fmt.Sprintf("%sdefault/pod-%02d", prefix, i)
				mustCreate(t, s, k, "v")
				want = append(want, k)
			}
			mustCreate(t, s, strings.TrimSuffix(prefix, "/")+"x/default/pod-99", "v") // beside the prefix

			var got []string
			opts := ListOptions{Limit: tt.limit}
			for page := 0; ; page++ {
				res, err := s.List(ctx, prefix, opts)
				if err != nil {
					t.Fatalf("List page %d: %v", page, err)
				}
				if page == 0 {
					// Later pages read the first page's snapshot, so this
					// write must not show up in them.
					mustCreate(t, s, prefix+"default/pod-00-late", "v")
				} else if res.Revision != opts.Revision {
					t.Fatalf("page %d: Revision = %d, want the requested %d", page, res.Revision, opts.Revision)
				}
				for _, kv := range res.Items {
					got = append(got, kv.Key)
				}
				if wantRemaining := int64(len(want) - len(got)); res.RemainingItemCount != wantRemaining || res.More != (wantRemaining > 0) {
					t.Fatalf("page %d: More = %v, RemainingItemCount = %d; want %v, %d", page, res.More, res.RemainingItemCount, wantRemaining > 0, wantRemaining)
				}
				if !res.More {
					break
				}
				if int64(len(res.Items)) != tt.limit {
					t.Fatalf("page %d has %d items, want %d", page, len(res.Items), tt.limit)
				}
				opts.Revision = res.Revision
				opts.StartKey = res.Items[len(res.Items)-1].Key + "\x00"
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages gave\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func TestListStartKey(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	for _, k := range []string{"/r/a", "/r/b", "/r/c", "/s/a"} {
		mustCreate(t, s, k, "v")
	}
	tests := []struct {
		startKey string
		want     string
	}{
		{startKey: "", want: "/r/a /r/b /r/c"},
		{startKey: "/", want: "/r/a /r/b /r/c"}, // before the prefix: the prefix starts
		{startKey: "/r/b", want: "/r/b /r/c"},
		{startKey: "/r/bb", want: "/r/c"},
		{startKey: "/r/c\x00", want: ""},
		{startKey: "/s/", want: ""}, // past the prefix
	}
	for _, tt := range tests {
		t.Run(tt.startKey, func(t *testing.T) {
			res, err := s.List(testCtx(t), "/r/", ListOptions{StartKey: tt.startKey})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if got := keys(res.Items); got != tt.want {
				t.Errorf("List from %q = [%s], want [%s]", tt.startKey, got, tt.want)
			}
		})
	}
}

func TestListAtRevision(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)
	revA := mustCreate(t, s, "/r/a", "a1")
	revB := mustCreate(t, s, "/r/b", "b1")
	old := revB
	if _, err := s.Update(ctx, "/r/a", []byte("a2"), revA); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, "/r/b", 0); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "/r/c", "c1")
	now := mustRevision(t, s)

	tests := []struct {
		name    string
		rev     int64
		want    string // key=value ...
		wantRev int64
		wantErr error
	}{
		{name: "latest", rev: 0, want: "/r/a=a2 /r/c=c1", wantRev: now},
		{name: "old", rev: old, want: "/r/a=a1 /r/b=b1", wantRev: old},
		{name: "before everything", rev: revA - 1, want: "", wantRev: revA - 1},
		{name: "future", rev: now + 100, wantErr: ErrFutureRevision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.List(ctx, "/r/", ListOptions{Revision: tt.rev})
			if !wantErr(err, tt.wantErr) {
				t.Fatalf("List at %d: err = %v, want %v", tt.rev, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			var got []string
			for _, kv := range res.Items {
				got = append(got, kv.Key+"="+string(kv.Value))
			}
			if !slices.Equal(got, strings.Fields(tt.want)) || res.Revision != tt.wantRev {
				t.Errorf("List at %d = %v at %d, want [%s] at %d", tt.rev, got, res.Revision, tt.want, tt.wantRev)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)
	const key = "/registry/core/pods/default/web"
	first := mustCreate(t, s, key, "v1")

	tests := []struct {
		name      string
		key       string
		expected  func(current int64) int64
		wantErr   error
		wantValue string // the value afterwards
	}{
		{name: "current revision", key: key, expected: func(cur int64) int64 { return cur }, wantValue: "new"},
		{name: "stale revision", key: key, expected: func(int64) int64 { return first }, wantErr: ErrConflict},
		{name: "revision 0 on an existing key", key: key, expected: func(int64) int64 { return 0 }, wantErr: ErrConflict},
		{name: "missing key", key: key + "-missing", expected: func(int64) int64 { return first }, wantErr: ErrNotFound},
		{name: "missing key, revision 0", key: key + "-missing", expected: func(int64) int64 { return 0 }, wantErr: ErrNotFound},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := s.Get(ctx, tt.key)
			var cur int64
			if before != nil {
				cur = before.Revision
			}
			value := fmt.Sprintf("new-%d", i)
			rev, err := s.Update(ctx, tt.key, []byte(value), tt.expected(cur))
			if !wantErr(err, tt.wantErr) {
				t.Fatalf("Update: err = %v, want %v", err, tt.wantErr)
			}
			after, getErr := s.Get(ctx, tt.key)
			switch {
			case err == nil:
				if rev <= cur || getErr != nil || string(after.Value) != value || after.Revision != rev {
					t.Errorf("after Update at %d: Get = %+v, %v; want %s at %d > %d", rev, after, getErr, value, rev, cur)
				}
			case before == nil:
				if !errors.Is(getErr, ErrNotFound) {
					t.Errorf("failed Update created the key: Get = %+v, %v", after, getErr)
				}
			default:
				if getErr != nil || string(after.Value) != string(before.Value) || after.Revision != before.Revision {
					t.Errorf("failed Update changed the key: %+v → %+v (%v)", before, after, getErr)
				}
			}
		})
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)

	tests := []struct {
		name     string
		create   bool
		expected func(current int64) int64
		wantErr  error
	}{
		{name: "unconditional", create: true, expected: func(int64) int64 { return 0 }},
		{name: "current revision", create: true, expected: func(cur int64) int64 { return cur }},
		{name: "stale revision", create: true, expected: func(cur int64) int64 { return cur - 1 }, wantErr: ErrConflict},
		{name: "missing, unconditional", expected: func(int64) int64 { return 0 }, wantErr: ErrNotFound},
		{name: "missing, with revision", expected: func(int64) int64 { return 1 }, wantErr: ErrNotFound},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("/r/key-%d", i)
			var cur int64
			if tt.create {
				cur = mustCreate(t, s, key, "v")
			}
			rev, err := s.Delete(ctx, key, tt.expected(cur))
			if !wantErr(err, tt.wantErr) {
				t.Fatalf("Delete: err = %v, want %v", err, tt.wantErr)
			}
			_, getErr := s.Get(ctx, key)
			switch {
			case err == nil:
				if rev <= cur || !errors.Is(getErr, ErrNotFound) {
					t.Errorf("Delete returned %d (key at %d), then Get err = %v; want a higher revision and ErrNotFound", rev, cur, getErr)
				}
				if now := mustRevision(t, s); rev != now {
					t.Errorf("Delete returned %d, store is at %d; want the delete's revision", rev, now)
				}
			case tt.create:
				if getErr != nil {
					t.Errorf("failed Delete removed the key: %v", getErr)
				}
			}
		})
	}
}

func TestCreateAllIsAllOrNothing(t *testing.T) {
	t.Parallel()
	s := openStore(t, Config{})
	ctx := testCtx(t)
	taken := "/registry/networking.k8s.io/ipaddresses/10.96.0.10"
	mustCreate(t, s, taken, "old")
	svc := "/registry/core/services/default/web"

	_, present, err := s.CreateAll(ctx, []KeyValue{{Key: taken, Value: []byte("new")}, {Key: svc, Value: []byte("svc")}})
	if !errors.Is(err, ErrExists) || !slices.Equal(present, []string{taken}) {
		t.Fatalf("CreateAll over a present key: present %v, err %v; want [%s] and ErrExists", present, err, taken)
	}
	if _, err := s.Get(ctx, svc); !errors.Is(err, ErrNotFound) {
		t.Errorf("the failed CreateAll wrote %s (err %v)", svc, err)
	}
	if kv, _ := s.Get(ctx, taken); string(kv.Value) != "old" {
		t.Errorf("the failed CreateAll changed %s to %q", taken, kv.Value)
	}

	free := "/registry/networking.k8s.io/ipaddresses/10.96.0.11"
	rev, present, err := s.CreateAll(ctx, []KeyValue{{Key: free, Value: []byte("ip")}, {Key: svc, Value: []byte("svc")}})
	if err != nil || present != nil {
		t.Fatalf("CreateAll of free keys: present %v, err %v", present, err)
	}
	for _, k := range []string{free, svc} {
		if kv, err := s.Get(ctx, k); err != nil || kv.Revision != rev {
			t.Errorf("Get %s after CreateAll at %d: %+v, %v", k, rev, kv, err)
		}
	}
}
