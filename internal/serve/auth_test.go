package serve

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The auth scheme's name is case-insensitive (RFC 9110 §11.1): "bearer"
// and "BEARER" carry the token as "Bearer" does. Only the token itself is
// compared exactly; before, any spelling but "Bearer " was a 401.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	b := bearer{token: []byte("0123456789abcdef-token")}
	for header, want := range map[string]bool{
		"Bearer 0123456789abcdef-token":   true,
		"bearer 0123456789abcdef-token":   true,
		"BEARER 0123456789abcdef-token":   true,
		"Bearer  0123456789abcdef-token ": true,
		"Bearer 0123456789ABCDEF-token":   false,
		"Basic 0123456789abcdef-token":    false,
		"Bearer":                          false,
		"Bearer0123456789abcdef-token":    false,
		"0123456789abcdef-token":          false,
		"":                                false,
	} {
		r := httptest.NewRequest("GET", "/v1/admin", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		require.Equal(t, want, b.allowed(r), "Authorization: %q", header)
	}
	require.False(t, bearer{}.allowed(httptest.NewRequest("GET", "/", nil)), "no token configured: nothing is allowed")
}
