package serve

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
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

// disabledPage is what a browser gets at /ui/ when the gateway runs
// without an admin token: how to turn the dashboard on, and nothing about
// this gateway.
const disabledPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>seqbox dashboard: turned off</title></head>
<body>
<h1>The seqbox dashboard is turned off</h1>
<p>This gateway was started without an <strong>admin token</strong>. The dashboard reads and acts
through the admin API (<code>/v1/admin/…</code>), and both stay off until the gateway has one.</p>
<h2>To open the dashboard</h2>
<ol>
<li>Start the gateway with an admin token of at least 16 characters:
<code>seqbox serve --admin-token TOKEN …</code>, or set <code>SEQBOX_ADMIN_TOKEN=TOKEN</code> in its environment
(the flag wins when both are given).</li>
<li>Open this page, <code>/ui/</code>, again.</li>
<li>Paste the token into the page's <em>Admin token</em> field. The page sends it as
<code>Authorization: Bearer …</code> with each call to the admin API and keeps it in that browser tab's
<code>sessionStorage</code> only: no cookie, nothing on disk, no other tab.</li>
</ol>
<p>Scripts get the same answer as a problem document (<code>application/problem+json</code>); the API is
described at <a href="/v1/openapi.json">/v1/openapi.json</a>.</p>
</body>
</html>
`

// disabledUI answers every request for the dashboard with 401 while the
// admin API is disabled: a browser (Accept: text/html) gets a page saying
// how to turn it on, anything else the admin API's problem document.
func disabledUI(admin bearer) http.Handler {
	problem := admin.wrap(http.NotFoundHandler()) // always refuses: no token is configured
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "text/html") {
			problem.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("Cache-Control", "no-store")
		h.Set("WWW-Authenticate", `Bearer realm="`+admin.realm+`"`)
		w.WriteHeader(http.StatusUnauthorized)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(disabledPage))
		}
	})
}
