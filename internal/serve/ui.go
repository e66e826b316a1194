package serve

import (
	"embed"
	"io/fs"
	"net/http"
)

// uiFiles is the dashboard: plain HTML, CSS and JavaScript, no build step
// and nothing loaded from elsewhere.
//
//go:embed ui
var uiFiles embed.FS

// uiPolicy allows the dashboard its own files and the admin API, nothing
// else.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// uiHandler serves the dashboard at /ui/. The files hold no data: every
// number on the page comes from the admin API, with the admin token the
// operator enters (kept in the tab's sessionStorage).
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", uiPolicy)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
