package serve

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3 document of the gateway, written by hand.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3 document served at /v1/openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
