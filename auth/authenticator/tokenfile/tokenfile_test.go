package tokenfile_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minictl/minictl/auth/authenticator/tokenfile"
)

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRead(t *testing.T) {
	p := write(t, "t1,alice,uid-1,\"dev,ops\"\nt2,bob,uid-2\n,nobody,uid-3\nt2,carol,uid-4\n")
	toks, err := tokenfile.Read(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok, err := toks.AuthenticateToken(context.Background(), "t1")
	if !ok || err != nil || resp.User.Name != "alice" || resp.User.UID != "uid-1" || !slices.Equal(resp.User.Groups, []string{"dev", "ops"}) {
		t.Errorf("t1 = %+v, %v, %v", resp, ok, err)
	}
	if resp, _, _ := toks.AuthenticateToken(context.Background(), "t2"); resp.User.Name != "carol" {
		t.Errorf("a repeated token is %s, want its last record's carol", resp.User.Name)
	}
	if _, ok, _ := toks.AuthenticateToken(context.Background(), ""); ok {
		t.Error("the empty token authenticates")
	}
	if _, ok, _ := toks.AuthenticateToken(context.Background(), "t3"); ok {
		t.Error("an unknown token authenticates")
	}
}

func TestReadTooFewColumns(t *testing.T) {
	_, err := tokenfile.Read(write(t, "t1,alice\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "must have at least 3 columns (token, user name, user uid), found 2") {
		t.Errorf("err = %v", err)
	}
}
