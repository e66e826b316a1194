package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// bearer guards a handler with a Bearer token, compared in constant time.
// An empty token means the endpoint is disabled: every request is refused
// with 401 and a problem body saying how to enable it. A refused request
// changes nothing.
type bearer struct {
	token   []byte
	realm   string
	disable string // detail when no token is configured
}

// allowed reports whether r carries the token.
func (b bearer) allowed(r *http.Request) bool {
	if len(b.token) == 0 {
		return false
	}
	// The scheme's name is case-insensitive (RFC 9110 §11.1); the token
	// is not.
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	// Hash both sides so the comparison takes the same time whatever the
	// lengths are.
	g, w := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256(b.token)
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

func (b bearer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.allowed(r) {
			next.ServeHTTP(w, r)
			return
		}
		detail := "missing or wrong Bearer token in the Authorization header"
		if len(b.token) == 0 {
			detail = b.disable
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+b.realm+`"`)
		writeProblem(w, r, Problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized, Detail: detail})
	})
}
