// Package tokenfile authenticates the static bearer tokens of
// kube-apiserver's --token-auth-file: a CSV of token, user name, uid and,
// optionally, a quoted comma-separated list of groups.
package tokenfile

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/minictl/minictl/auth/authenticator"
	"github.com/minictl/minictl/auth/user"
)

// Tokens maps each token to its user.
type Tokens map[string]*user.Info

// AuthenticateToken is the user of token, if the file has it.
func (t Tokens) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	u, ok := t[token]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: u}, true, nil
}

var _ authenticator.Token = Tokens(nil)

// Read reads the token file at path, with kube's rules: every record has
// at least three columns, a record with an empty token is skipped, a
// token that appears twice takes its last record's user. log hears of the
// records skipped (never of a token itself); it may be nil.
func Read(path string, log *slog.Logger) (Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	tokens := Tokens{}
	for n := 1; ; n++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return tokens, nil
		}
		if err != nil {
			return nil, fmt.Errorf("token file '%s': %w", path, err)
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("token file '%s' must have at least 3 columns (token, user name, user uid), found %d", path, len(rec))
		}
		if rec[0] == "" {
			log.Warn("empty token has been found in token file", "file", path, "record", n)
			continue
		}
		if _, dup := tokens[rec[0]]; dup {
			log.Warn("duplicate token has been found in token file", "file", path, "record", n)
		}
		u := &user.Info{Name: rec[1], UID: rec[2]}
		if len(rec) >= 4 && rec[3] != "" {
			u.Groups = strings.Split(rec[3], ",")
		}
		tokens[rec[0]] = u
	}
}
