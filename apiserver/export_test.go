package apiserver

import (
	"net/http"

	"github.com/minictl/minictl/auth/user"
)

// WhoAmI is the secure port's authentication in front of a handler that
// answers with the user it proved: tests see who a credential is.
func (s *Server) WhoAmI() http.Handler {
	return s.authenticate(true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := user.From(r.Context())
		writeJSON(w, http.StatusOK, u)
	}))
}
