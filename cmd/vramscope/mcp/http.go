package mcp

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the streamable HTTP endpoint is served.
const Path = "/mcp"

// maxRequestBytes bounds one HTTP request's body: a tool call is a few
// hundred bytes; the daemon's own bound is 1 MiB (api.MaxMessageBytes).
const maxRequestBytes = 1 << 20

// HTTPHandler serves the server over streamable HTTP at Path, to requests
// that carry token: as "Authorization: Bearer TOKEN" or, for clients that
// cannot set a header, the query parameter token=TOKEN. The rule is the
// daemon's for TCP (docs/security.md): every local user can reach a
// loopback port, so only the owner's token is let in. The SDK's own check
// refuses a Host header that is not localhost (DNS rebinding).
func HTTPHandler(cfg Config, token string) http.Handler {
	srv := New(cfg)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute})
	mux := http.NewServeMux()
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		if !hasToken(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vramscope"`)
			http.Error(w, "vramscope mcp: send the token from the token file (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
		h.ServeHTTP(w, r)
	})
	return mux
}

// hasToken compares in constant time; an empty token lets nobody in.
func hasToken(r *http.Request, token string) bool {
	got := r.URL.Query().Get("token")
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		got = strings.TrimPrefix(auth, "Bearer ")
	}
	return token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// NewHTTPServer is an http.Server with the bounds a loopback server needs
// against a local user without the token: 16 KiB of headers sent within 5 s.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 16 << 10}
}
